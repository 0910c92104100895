"""How the operating commands (``hyperwarm publish``, ``hyperwarm refresh abort|reset``) end on a failure: one
line on stderr, exit 1 for what the user must change, exit 2 for what AWS answered (or could not be reached)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def run_aws(command: str, action: Callable[[], T], *, refused: tuple[type[Exception], ...] = (ValueError,),
            failed: tuple[type[Exception], ...] = ()) -> tuple[T | None, int]:
    """``action()``'s result and 0, or None and the exit code after saying why under ``command``'s name:
    ``refused`` exceptions exit 1; botocore's errors and ``failed`` exit 2."""
    from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError, NoRegionError

    try:
        return action(), 0
    except refused as exc:
        print(f"{command}: {exc}", file=sys.stderr)
        return None, 1
    except NoRegionError:
        print(f"{command}: no AWS region; give --region or set AWS_REGION", file=sys.stderr)
        return None, 2
    except NoCredentialsError:
        print(f"{command}: no AWS credentials found; set AWS_PROFILE or run `aws configure`", file=sys.stderr)
        return None, 2
    except (ClientError, BotoCoreError, *failed) as exc:
        print(f"{command}: {exc}", file=sys.stderr)
        return None, 2
