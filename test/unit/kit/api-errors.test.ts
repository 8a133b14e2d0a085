import {
  isNamespaceTerminating,
  isRetryable,
  statusOf,
} from "../../../capabilities/kit/api-errors";

/** The API server's answer to a create in a namespace being deleted (Kubernetes 1.35, verbatim). */
const TERMINATING = {
  kind: "Status",
  apiVersion: "v1",
  metadata: {},
  status: "Failure",
  message:
    'persistentvolumeclaims "late" is forbidden: unable to create new content in namespace ' +
    "it-doomed-m92uas because it is being terminated",
  reason: "Forbidden",
  details: {
    name: "late",
    kind: "persistentvolumeclaims",
    causes: [
      {
        reason: "NamespaceTerminating",
        message: "namespace it-doomed-m92uas is being terminated",
        field: "metadata.namespace",
      },
    ],
  },
  code: 403,
};

describe("API errors", () => {
  it("recognises a create refused because the namespace is being deleted", () => {
    expect(isNamespaceTerminating({ status: 403, data: TERMINATING })).toBe(true);
  });

  it("does not take any other 403 for it", () => {
    const rbac = { ...TERMINATING, message: "forbidden: User cannot create", details: {} };
    expect(isNamespaceTerminating({ status: 403, data: rbac })).toBe(false);
    expect(isNamespaceTerminating({ status: 403 })).toBe(false);
    expect(isNamespaceTerminating(new Error("socket hang up"))).toBe(false);
    expect(isRetryable({ status: 403, data: TERMINATING })).toBe(false);
  });

  it("reads the status of either client's errors, and none from a network error", () => {
    expect(statusOf({ status: 409 })).toBe(409);
    expect(statusOf(new Error("ECONNRESET"))).toBeUndefined();
    expect(isRetryable(new Error("ECONNRESET"))).toBe(true);
  });
});
