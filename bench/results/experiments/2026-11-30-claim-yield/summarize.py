"""Prints one line per run of this experiment: the variant, the machine's baseline, the
back-to-back series and both streams."""
import glob
import json

for f in sorted(glob.glob("*.json")):
    r = json.load(open(f))["results"]
    c1 = r["warmClaim"]["concurrency1"]
    row = [f[:24], f.split("Z-")[1][:-5].ljust(4),
           f"patch after idle p50 {r['wakeUp']['patchAfterIdle']['p50']}",
           f"back to back p50 {c1['p50']} p95 {c1['p95']} p99 {c1['p99']} ({c1['claimed']}/40)"]
    for k in ("every250ms", "every125ms"):
        x = r["warmClaimStream"][k]
        w = x["warm"]
        beside = x.get("warmBesideOtherWrites", {}).get("n", 0)
        row.append(f"{k}: p50 {w['p50']} p95 {w['p95']} p99 {w['p99']} ({w['claimed']}/{w['of']},"
                   f" {beside} beside other writes)")
    print(" | ".join(row))
