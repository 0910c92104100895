"""Deploy rehearsal: rules over a synthesized cloud assembly for what AWS documents but no schema sees.

cfn-lint, botocore and the operator CRDs check shapes. A template can pass all of them and still
roll back on a real deploy (autoscaling registered before its endpoint exists, a bucket read before
the stack that creates it) or leave a model that never serves. Each rule here encodes one such
documented requirement, cites its AWS source, and is shown to fail on a defective template in
`tests/rehearsal/`. Run it over any `cdk.out/`: `python -m rehearsal cdk.out`.
"""

from rehearsal.core import Assembly, Finding, Rule, all_rules, rehearse, rule

__all__ = ["Assembly", "Finding", "Rule", "all_rules", "rehearse", "rule"]
