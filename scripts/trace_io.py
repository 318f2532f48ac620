"""Reading an `mk-bench --trace` file (Chrome/Perfetto trace JSON, optionally
gzipped), shared by render-trace.py and trace-bands.py. Standard library
only."""

import gzip
import json


def load(path):
    """The file's trace events (its `traceEvents`, or the bare list)."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        data = json.load(f)
    return data["traceEvents"] if isinstance(data, dict) else data
