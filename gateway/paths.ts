import { API_VERSION } from "../capabilities/api/common";

/** The CubePod API group's root path. */
export const GROUP_PATH = `/apis/${API_VERSION}`;
