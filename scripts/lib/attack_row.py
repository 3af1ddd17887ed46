#!/usr/bin/env python3
"""One row of scripts/bench_attacks' table from a fleet run's summary.csv: the attack's bad
units returned, merged, refused (and why), undecided at the end; the share merged of those
decided with its one-sided 95 % upper bound (Clopper-Pearson); the honest refusals and the
checks' compute against the training's; the attackers' honest (cover) units returned and refused.
  attack_row.py SUMMARY_CSV SEED ATTACK"""
import csv
import math
import re
import sys


def binomial_cdf(k, n, p):
    """P(X <= k) for X ~ Binomial(n, p)."""
    return sum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(k + 1))


def upper_bound(merged, decided, alpha=0.05):
    """The largest p with P(X <= merged) >= alpha: one-sided Clopper-Pearson."""
    if decided == 0:
        return 1.0
    if merged == decided:
        return 1.0
    low, high = merged / decided, 1.0
    for _ in range(60):
        mid = (low + high) / 2
        low, high = (mid, high) if binomial_cdf(merged, decided, mid) > alpha else (low, mid)
    return high


def counts(text):
    """'noise=2/9(misaligned=1 copied=1) none=0/40' -> {name: (count, returned, reasons)}."""
    out = {}
    for name, count, returned, reasons in re.findall(r"(\w+)=(\d+)/(\d+)(?:\(([^)]*)\))?", text):
        out[name] = (int(count), int(returned), reasons or "")
    return out


def main():
    path, seed, attack = sys.argv[1:]
    rows = [r for r in csv.DictReader(open(path)) if r["run"] == "fedasync"]
    if not rows:
        sys.exit(f"{path}: no fedasync run")
    row = rows[0]
    merged, returned, _ = counts(row["attacks_merged_of_returned"]).get(attack, (0, 0, ""))
    refusals = counts(row["refused_of_returned"])
    refused, _, reasons = refusals.get(attack, (0, returned, ""))
    honest_refused, honest_returned, _ = refusals.get("none", (0, 0, ""))
    cover_refused, cover_returned, _ = refusals.get("cover", (0, 0, ""))
    decided = merged + refused
    share = merged / decided if decided else float("nan")
    print(
        ",".join(
            [seed, attack, str(returned), str(merged), str(refused), str(returned - decided), f"{share:.3f}",
             f"{upper_bound(merged, decided):.3f}", reasons.replace(" ", ";") or "-", str(honest_returned),
             str(honest_refused), row["check_vs_training"], row.get("commitment_vs_training", ""),
             row.get("audit_vs_training", ""), row.get("audited_share", ""), str(cover_returned),
             str(cover_refused), row.get("loss_check_vs_training", ""), row.get("all_checks_vs_training", "")]
        )
    )


if __name__ == "__main__":
    main()
