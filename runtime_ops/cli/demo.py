"""`runtime-ops demo seed`: land the demo corpus in the demo pipeline's landing folder or bucket."""

from __future__ import annotations

import argparse
from typing import Any

from runtime_ops.components.loading import get_spec
from runtime_ops.demo import corpus_keys, land_corpus
from runtime_ops.errors import UserError
from runtime_ops.landing import LandingError, open_landing
from runtime_ops.settings import get_settings


def cmd_demo_seed(args: argparse.Namespace) -> int:
    dest = args.dest or get_spec("demo").landing.uri
    # Only what is not there yet: `make dev` landed 70%, and the rest is the second batch (landing the same files
    # again would only record them as duplicates).
    try:
        landed = land_corpus(
            open_landing(dest, endpoint_url=get_settings().aws_endpoint_url), subset=args.subset, only_missing=True
        )
    except (LandingError, OSError) as exc:  # the landing cannot be made or written, or holds a link on the way
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise UserError(f"cannot land the demo corpus in {dest}: {reason}; choose a writable landing") from None
    print(f"landed {len(landed)} demo documents in {dest} ({len(corpus_keys()) - len(landed)} were there already)")
    return 0


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a fraction in (0, 1], e.g. 0.3")
    return value


def register(sub: Any) -> None:
    demo = sub.add_parser("demo", help="demo data")
    dmsub = demo.add_subparsers(dest="action", required=True)
    p = dmsub.add_parser("seed", help="copy the demo corpus into the demo pipeline's landing folder or bucket")
    p.add_argument("--dest", default=None, help="where to copy (default: the demo pipeline's landing)")
    p.add_argument("--subset", type=_fraction, default=None, help="fraction of the corpus to copy (0-1)")
    p.set_defaults(func=cmd_demo_seed)
