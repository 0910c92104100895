"""`python -m rehearsal [cdk.out]`: print every finding and exit 1 if there is one."""

from __future__ import annotations

import sys

from rehearsal.core import Assembly, all_rules, rehearse


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    outdir = args[0] if args else "cdk.out"
    findings = rehearse(Assembly.from_outdir(outdir))
    for finding in findings:
        print(finding)
    print(f"deploy rehearsal: {len(all_rules())} rules, {len(findings)} findings in {outdir}")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
