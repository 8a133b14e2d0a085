import type { PoddClient } from "../../testkit/podd-client";

/*
 * A package-like tree an agent installs outside /workspace with its own commands: a tool in
 * /usr/local/bin and its config in /etc as root, a cache in its home as its user. What each
 * lifecycle step keeps of the rootfs volume is read back through the same daemon.
 */

const AS_ROOT =
  "printf '#!/bin/sh\\necho tool-ran\\n' > /usr/local/bin/tool && chmod +x /usr/local/bin/tool && " +
  "echo conf > /etc/tool.conf";
const AS_USER = "mkdir -p ~/.cache && echo cached > ~/.cache/x";
const READ_BACK =
  "cat /etc/tool.conf /home/user/.cache/x 2>/dev/null; /usr/local/bin/tool 2>/dev/null; true";

/** What {@link installed} reads once the whole tree is there. */
export const ALL_INSTALLED = "conf\ncached\ntool-ran\n";

export async function install(podd: PoddClient): Promise<void> {
  await podd.sh(AS_ROOT, "root");
  await podd.sh(AS_USER, "user");
}

/** What of the tree the sandbox has: {@link ALL_INSTALLED}, a part of it, or "". */
export const installed = (podd: PoddClient) => podd.sh(READ_BACK);
