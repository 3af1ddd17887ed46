#!/usr/bin/env python3
"""Figures of a scripts/gpu-check volunteer run, read from the running server's API and the
volunteers' JSON logs: versions per minute, each volunteer's samples/s and verdicts, the
rejections and their reasons, and the distances of replica comparisons.
Usage: gpu_check_report.py SERVER_URL SECONDS CLIENT_LOG...
       gpu_check_report.py --compared SERVER_URL   (prints how many replica comparisons it made)
Exits 1 when the server accepted no result or a replica comparison exceeded its tolerance."""
import json
import statistics
import sys
import urllib.request


def get(base, path):
    with urllib.request.urlopen(base + path, timeout=30) as response:
        return json.load(response)


def client_results(path):
    device, results = "?", []
    with open(path) as log:
        for line in log:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if event.get("event") == "device":
                device = event["message"].removeprefix("device: ")
            elif event.get("event") == "result":
                results.append(event)
    return device, results


def comparisons(base):
    events = get(base, "/api/v1/events?after=0&limit=1000")["events"]
    return [json.loads(e["detail"]) if isinstance(e["detail"], str) else e["detail"]
            for e in events if e["kind"] == "replicas_compared"]


def main():
    if sys.argv[1] == "--compared":
        print(len(comparisons(sys.argv[2])))
        return 0
    base, seconds, logs = sys.argv[1], float(sys.argv[2]), sys.argv[3:]
    stats = get(base, "/api/v1/stats")
    versions = get(base, "/api/v1/versions")["versions"]
    newest = max((v["version"] for v in versions), default=0)
    evaluated = [v for v in versions if v.get("validation_loss") is not None]
    print(f"  versions: {newest} in {seconds / 60:.1f} min = {newest / (seconds / 60):.2f} versions/minute")
    if evaluated:
        print(f"  validation loss: v{evaluated[0]['version']} {evaluated[0]['validation_loss']:.4f} -> "
              f"v{evaluated[-1]['version']} {evaluated[-1]['validation_loss']:.4f}")
    print(f"  work units by state: {json.dumps(stats.get('work_units', {}))}")

    accepted = 0
    for volunteer in get(base, "/api/v1/volunteers")["volunteers"]:
        accepted += volunteer["accepted"]
        print(f"  volunteer {volunteer['name']}: device \"{volunteer.get('device')}\", "
              f"{volunteer.get('samples_per_s') or 0:.0f} samples/s (last reported), "
              f"accepted {volunteer['accepted']}, rejected {volunteer['rejected']}")
    for path in logs:
        device, results = client_results(path)
        speeds = [r["samples_per_s"] for r in results if "samples_per_s" in r]
        states = [r.get("state", "?") for r in results]
        speed = f"median {statistics.median(speeds):.0f} samples/s" if speeds else "no speed"
        sizes = sorted({r.get("bytes") for r in results})
        print(f"  client log {path.rsplit('/', 2)[-2]}/{path.rsplit('/', 1)[-1]} ({device}): {len(results)} results, "
              f"{speed}, states {sorted(set(states))}, delta bytes {sizes[:3]}")

    for rejection in get(base, "/api/v1/rejections?limit=20")["rejections"]:
        print(f"  rejected {rejection['wu_id']}: {rejection['reason']}: {rejection.get('detail', '')}")
    compared = comparisons(base)
    too_far = [c for c in compared if c["relative_l2"] > c["tolerance"]]
    if compared:
        distances = sorted(c["relative_l2"] for c in compared)
        print(f"  replica comparisons: {len(compared)}, relative L2 min {distances[0]:.4f} median "
              f"{statistics.median(distances):.4f} max {distances[-1]:.4f} (tolerance {compared[0]['tolerance']}), "
              f"{len(too_far)} over")
    if accepted == 0 or too_far:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
