"""Let the tests import `cuda_agent.reward` from this checkout without installing it, and
`reward_strategies` (the shared test outcome and strategies) from this folder."""

import sys
from pathlib import Path

for _path in (Path(__file__).resolve().parents[1] / "src", Path(__file__).resolve().parent):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))
