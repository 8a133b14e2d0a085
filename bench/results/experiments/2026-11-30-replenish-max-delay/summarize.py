"""Prints one line per run of this experiment: the value, the machine's baseline, each stream."""
import glob
import json

for f in sorted(glob.glob("*.json")):
    r = json.load(open(f))["results"]
    s = r["warmClaimStream"]
    row = [f[:24], "max " + f.split("-max")[1][:-5] + " ms",
           f"patch after idle p50 {r['wakeUp']['patchAfterIdle']['p50']}"]
    for k in ("every250ms", "every125ms"):
        x = s[k]
        w = x["warm"]
        cold = f", cold p50 {x['cold']['p50']}" if "cold" in x else ""
        row.append(f"{k}: {w['claimed']}/{w['of']} warm, p50 {w['p50']} p99 {w['p99']}{cold},"
                   f" fewest ready {x['fewestReadyStandbys']}")
    print(" | ".join(row))
