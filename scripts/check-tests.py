#!/usr/bin/env python3
"""Reads CTest's JUnit report and says what the run proved: failures, every skip with its reason,
and (strict mode) fails the run on a skip whose reason is not on the allowlist.

  scripts/check-tests.py --junit build/ctest-junit.xml [--allowlist tests/skip_allowlist.txt]
                         [--strict] [--extra NAME=passed|failed|skipped:REASON ...]

A skip's reason: a GoogleTest entry's GTEST_SKIP message (the lines after "FILE:LINE: Skipped"); a
script test's "SKIP: REASON" line. Script tests that pass may print "SKIP: REASON" lines too, for
tests skipped inside them (kernel_paths.sh's gtest runs, run.sh's node tests): those are judged the
same way. --extra adds a check that ran outside CTest (scripts/test.sh: the fuzz smoke).
The last line printed is the summary: "N passed, N failed, N skipped". Under --strict a skip the
allowlist does not allow counts as failed. Exit status: 0 when nothing failed, else 1.
"""
import argparse
import re
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict


def load_allowlist(path):
    entries = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if line.strip() and not line.lstrip().startswith("#"):
                entries.append((line, re.compile(line)))
    return entries


def gtest_skip_reason(out):
    """The GTEST_SKIP message of a GoogleTest entry's output, or None."""
    lines = out.splitlines()
    for i, line in enumerate(lines):
        if line.endswith(": Skipped"):
            reason = []
            for nxt in lines[i + 1:]:
                if not nxt.strip() or nxt.startswith("[  SKIPPED ]"):
                    break
                reason.append(nxt.strip())
            return " ".join(reason)
    return None


SKIP_LINE = re.compile(r"^SKIP: (.*)$", re.M)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--junit", required=True)
    ap.add_argument("--allowlist")
    ap.add_argument("--strict", action="store_true")
    ap.add_argument("--extra", action="append", default=[])
    a = ap.parse_args()

    allow = load_allowlist(a.allowlist) if a.allowlist else []

    def allowed_by(reason):
        for text, rx in allow:
            if rx.search(reason):
                return text
        return None

    try:
        root = ET.parse(a.junit).getroot()
    except (OSError, ET.ParseError) as e:
        print(f"check-tests: cannot read CTest's report {a.junit}: {e}", file=sys.stderr)
        print("0 passed, 1 failed")
        return 1

    passed, failed, skipped = [], [], []  # skipped: (test, reason, inner)
    for case in root.iter("testcase"):
        name = case.get("name")
        status = case.get("status")
        out = case.findtext("system-out") or ""
        if status == "fail":
            failed.append((name, "failed"))
            continue
        if status in ("notrun", "disabled"):
            reason = gtest_skip_reason(out)
            if reason is None:
                m = SKIP_LINE.search(out)
                reason = m.group(1).strip() if m else None
            if reason is None:
                el = case.find("skipped")
                msg = el.get("message") if el is not None else status
                reason = f"no reason printed (CTest: {msg})"
            skipped.append((name, reason or "GTEST_SKIP() without a message", False))
            continue
        passed.append(name)
        for m in SKIP_LINE.finditer(out):
            skipped.append((name, m.group(1).strip(), True))

    for extra in a.extra:
        name, _, result = extra.partition("=")
        if result == "passed":
            passed.append(name)
        elif result.startswith("skipped:"):
            skipped.append((name, result[len("skipped:"):], False))
        else:
            failed.append((name, result or "failed"))

    if not passed and not failed and not skipped:
        print(f"check-tests: {a.junit} lists no test", file=sys.stderr)
        failed.append(("(no test ran)", "failed"))

    by_reason = defaultdict(list)
    for name, reason, inner in skipped:
        by_reason[reason].append(name + (" (inside)" if inner else ""))
    refused = []
    if by_reason:
        print("\nSkipped, by reason (tests; the allowlist entry that allows it):")
        for reason in sorted(by_reason, key=lambda r: (-len(by_reason[r]), r)):
            names = by_reason[reason]
            entry = allowed_by(reason)
            verdict = f"allowed by '{entry}'" if entry else "NOT on the allowlist"
            shown = ", ".join(names[:4]) + (f", … ({len(names)} in all)" if len(names) > 4 else "")
            print(f"  {len(names):4d}  {reason}\n        [{verdict}] {shown}")
            if not entry:
                refused.extend((n, reason) for n in names)
    if a.strict:
        print(f"\nStrict mode (CI set or PAGODA_STRICT=1): a skip must match the allowlist ({a.allowlist}):")
        for text, _ in allow:
            print(f"  {text}")
        if refused:
            print(f"\n{len(refused)} skip(s) not on the allowlist fail this run: install what each reason names, "
                  "or (hardware only) add the condition to the allowlist.")
    if failed:
        print("\nFailed:")
        for name, why in failed:
            print(f"  {name}: {why}")

    n_ctest_skipped = sum(1 for _, _, inner in skipped if not inner)
    n_inner = len(skipped) - n_ctest_skipped
    n_failed = len(failed) + (sum(1 for n, _ in refused if not n.endswith(" (inside)")) if a.strict else 0)
    # A passing test with refused skips inside it becomes a failure under strict mode.
    n_passed = len(passed)
    if a.strict:
        inner_refused = {n[: -len(" (inside)")] for n, _ in refused if n.endswith(" (inside)")}
        n_passed -= len(inner_refused)
        n_failed += len(inner_refused)
    n_skipped = n_ctest_skipped - (sum(1 for n, _ in refused if not n.endswith(" (inside)")) if a.strict else 0)
    if n_inner:
        print(f"\n({n_inner} tests skipped inside script tests that ran; listed above as '(inside)')")
    print()
    print(f"{n_passed} passed, {n_failed} failed" + (f", {n_skipped} skipped" if n_skipped else ""))
    return 1 if n_failed else 0


if __name__ == "__main__":
    sys.exit(main())
