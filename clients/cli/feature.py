"""``ketch feature describe|upgrade|downgrade`` for finalized features (kafka-features).

``describe`` reads a broker's ApiVersions: each feature this broker supports (min..max),
its finalized level and the finalized features epoch (the metadata offset the broker has
applied). ``upgrade`` and ``downgrade`` are UpdateFeatures, decided by the active
controller with Kafka's rules: the level must be supported by every broker and controller,
and metadata.version may go down only across levels that did not change the metadata
(``--unsafe`` asks for a lossy downgrade, which Kafka refuses for metadata.version too).
A refused update changes nothing and prints the controller's reason.
"""
from __future__ import annotations

import argparse

from clients.cli import _common as c

EXAMPLES = """examples:
  ketch feature describe
  ketch feature downgrade metadata.version=18 --dry-run
  ketch feature downgrade metadata.version=18
  ketch feature upgrade metadata.version=21
"""


def register(sub: argparse._SubParsersAction) -> None:
    action = c.verb_with_actions(sub, "feature", "describe, upgrade and downgrade features",
                                 __doc__, EXAMPLES)
    action("describe", "supported ranges and finalized levels", describe)
    a = action("upgrade", "raise finalized levels (UpdateFeatures)", upgrade)
    a.add_argument("pairs", nargs="+", metavar="FEATURE=LEVEL")
    a.add_argument("--dry-run", action="store_true", help="validate only, change nothing")
    a = action("downgrade", "lower finalized levels (UpdateFeatures); LEVEL 0 removes", downgrade)
    a.add_argument("pairs", nargs="+", metavar="FEATURE=LEVEL")
    a.add_argument("--unsafe", action="store_true", help="allow a lossy downgrade")
    a.add_argument("--dry-run", action="store_true", help="validate only, change nothing")


def describe(args: argparse.Namespace) -> int:
    with c.admin(args) as admin:
        features = admin.describe_features()
    names = sorted(set(features.supported_features) | set(features.finalized_features))
    rows = [{"feature": n,
             "supported_min": features.supported_features.get(n, (None, None))[0],
             "supported_max": features.supported_features.get(n, (None, None))[1],
             "finalized": features.finalized_features.get(n),
             "epoch": features.finalized_features_epoch} for n in names]
    c.emit(args, rows, ["feature", "supported_min", "supported_max", "finalized", "epoch"])
    return 0


def _levels(args: argparse.Namespace, what: str) -> dict[str, int]:
    levels = {}
    for name, raw in c.parse_kv(args.pairs, what).items():
        try:
            levels[name] = int(raw)
        except ValueError:
            raise c.CliError(f"{name}: {raw!r} is not a level (an integer)") from None
    return levels


def _update(args: argparse.Namespace, levels: dict[str, int], upgrade_type) -> int:
    from clients.admin import FeatureUpdate
    with c.admin(args) as admin:
        admin.update_features({n: FeatureUpdate(v, upgrade_type) for n, v in levels.items()},
                              validate_only=args.dry_run)
    c.emit(args, [{"feature": n, "level": v, "type": upgrade_type.name.lower(),
                   "applied": not args.dry_run} for n, v in levels.items()],
           ["feature", "level", "type", "applied"])
    return 0


def upgrade(args: argparse.Namespace) -> int:
    from clients.admin import UpgradeType
    return _update(args, _levels(args, "upgrade"), UpgradeType.UPGRADE)


def downgrade(args: argparse.Namespace) -> int:
    from clients.admin import UpgradeType
    return _update(args, _levels(args, "downgrade"),
                   UpgradeType.UNSAFE_DOWNGRADE if args.unsafe else UpgradeType.SAFE_DOWNGRADE)
