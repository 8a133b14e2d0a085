"""Prints one line per run of this experiment: the finishes' longest wait, the machine's
baseline and the back-to-back series (whole, from the full pool, during the refill)."""
import glob
import json

for f in sorted(glob.glob("*.json")):
    r = json.load(open(f))["results"]
    c1 = r["warmClaim"]["concurrency1"]
    full, refill = c1["fromFullPool"], c1["duringRefill"]
    print(" | ".join([
        f[:24], ("max " + f.split("-max")[1][:-5] + " ms").ljust(12),
        f"patch after idle p50 {r['wakeUp']['patchAfterIdle']['p50']}",
        f"back to back p50 {c1['p50']} p95 {c1['p95']} p99 {c1['p99']} ({c1['claimed']}/40)",
        f"full pool p50 {full['p50']} p99 {full['p99']}",
        f"during refill p50 {refill['p50']} p99 {refill['p99']}",
    ]))
