#!/usr/bin/env python3
"""The soak's report (scripts/soak): reads monitor.csv, latency.csv, tally.txt and faults.txt
from the soak's output directory, prints the figures docs/benchmarks.md records, and checks
that memory and open files stayed flat after warm-up, that the state directory stayed bounded,
that the server recovered from the faults, and that no misbehaving connection got through.
Exits 1 when a check fails."""
import argparse
import csv
import statistics
import sys
from pathlib import Path


def read_csv(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def last_process(samples):
    """The samples of the server process that ran last, after its first 30 % (warm-up)."""
    pid = samples[-1]["pid"]
    mine = [s for s in samples if s["pid"] == pid]
    return mine[int(len(mine) * 0.3):]


def slope_per_hour(points):
    """Least-squares slope of (seconds, value) points, per hour."""
    if len(points) < 2:
        return 0.0
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    var = sum((x - mx) ** 2 for x in xs)
    return 0.0 if var == 0 else sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / var * 3600


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--minutes", type=float, required=True)
    parser.add_argument("--volunteers", type=int, required=True)
    parser.add_argument("--backend", default="sqlite")
    parser.add_argument("--servers", type=int, default=1)
    args = parser.parse_args()
    out = Path(args.out)
    failures = []

    def check(ok, what):
        print(f"  [{'ok' if ok else 'FAILED'}] {what}")
        if not ok:
            failures.append(what)

    monitor = [{k: (v if k == "pid" else float(v)) for k, v in row.items()} for row in read_csv(out / "monitor.csv")]
    latency = read_csv(out / "latency.csv")
    tally = {}
    for line in (out / "tally.txt").read_text().splitlines():
        if line.startswith("    first: "):
            continue
        name, _, count = line.strip().rpartition(": ")
        tally[name] = int(count)

    print(f"soak report: {args.volunteers} volunteers, {args.minutes:g} min, {args.backend}, "
          f"{args.servers} server process(es)")
    print("  faults: " + "; ".join(l.strip() for l in (out / "faults.txt").read_text().splitlines()))

    # Memory and open files of the last server process, after its warm-up.
    steady = last_process(monitor)
    if len(steady) < 8:
        check(False, "enough monitor samples of the last server process (got %d)" % len(steady))
    else:
        quarter = max(1, len(steady) // 4)
        rss_early = max(s["rss_kib"] for s in steady[:quarter]) / 1024
        rss_late = max(s["rss_kib"] for s in steady[-quarter:]) / 1024
        fds_early = max(s["open_files"] for s in steady[:quarter])
        fds_late = max(s["open_files"] for s in steady[-quarter:])
        rss_slope = slope_per_hour([(s["seconds"], s["rss_kib"] / 1024) for s in steady])
        print(f"  resident memory after warm-up: {rss_early:.0f} MiB early, {rss_late:.0f} MiB late "
              f"(slope {rss_slope:+.0f} MiB/h); open files {fds_early:.0f} early, {fds_late:.0f} late")
        check(rss_late <= rss_early * 1.25 + 64, "resident memory flat (late ≤ 1.25 × early + 64 MiB)")
        check(fds_late <= fds_early + 64, "open files flat (late ≤ early + 64)")
    hours = max(monitor[-1]["seconds"] - monitor[0]["seconds"], 1) / 3600
    db_growth = (monitor[-1]["database_kib"] - monitor[0]["database_kib"]) / 1024 / hours
    state_end = monitor[-1]["state_kib"] / 1024
    state_max = max(s["state_kib"] for s in monitor) / 1024
    print(f"  state directory: {state_end:.0f} MiB at the end, {state_max:.0f} MiB at most; "
          f"database {monitor[-1]['database_kib'] / 1024:.0f} MiB, growing {db_growth:.0f} MiB/h")
    files_end = state_end - monitor[-1]["database_kib"] / 1024 if args.backend == "sqlite" else state_end
    half = monitor[len(monitor) // 2]
    files_half = half["state_kib"] / 1024 - (half["database_kib"] / 1024 if args.backend == "sqlite" else 0)
    check(files_end <= 2 * files_half + 64, "state files (less the database) bounded: end ≤ 2 × mid-run + 64 MiB")

    # Work requests: p99 per minute, and recovery: the last fifth of the run served.
    work = [row for row in latency if row["route"] == "work"]
    p99s = [float(row["p99_ms"]) for row in work]
    if p99s:
        print(f"  work requests: p99 per minute median {statistics.median(p99s):.0f} ms, worst {max(p99s):.0f} ms; "
              f"p50 median {statistics.median(float(r['p50_ms']) for r in work):.0f} ms; "
              f"{sum(int(r['requests']) for r in work)} requests")
    uploads = [row for row in latency if row["route"] == "upload"]
    if uploads:
        print(f"  uploads: p99 per minute median {statistics.median(float(r['p99_ms']) for r in uploads):.0f} ms; "
              f"{sum(int(r['requests']) for r in uploads)} requests")
    last_minute = max((int(r["minute"]) for r in work), default=0)
    last_minutes = [r for r in work if int(r["minute"]) >= min(int(args.minutes * 0.8), last_minute)]
    served = sum(int(r["requests"]) - int(r["failures"]) for r in last_minutes)
    asked = sum(int(r["requests"]) for r in last_minutes)
    check(asked > 0 and served >= 0.95 * asked,
          f"recovered: {served} of {asked} work requests answered in the last fifth of the run (≥ 95 %)")

    # Misbehaviour that must never succeed.
    for name in ("forged upload: ACCEPTED", "garbage upload: ACCEPTED", "slow headers: STILL OPEN after 120 s"):
        check(tally.get(name, 0) == 0, f"{name.split(':')[0]}: never {name.split(': ')[1].lower()}")
    check(tally.get("slow headers: closed by the server within 40 s", 0) > 0, "slow headers closed by the server")
    refused_unknown = sum(n for name, n in tally.items() if name.startswith("unknown uploader: answered 4"))
    check(refused_unknown > 0, f"uploads from unknown clients answered before their bodies ({refused_unknown})")
    print("soak report: " + ("PASSED" if not failures else "FAILED: " + "; ".join(failures)))
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
