// Integration tests start and stop real processes; their steps take seconds, not milliseconds.
jest.setTimeout(180_000);
