#!/usr/bin/env python3
"""What a golden trace reads to: the analyzer's whole JSON document for it, without the fields
that name where the file lies (inputs[].path, processes[].path).  test_golden_traces holds every
later analyzer to it: each key and value here must still be there (keys the analyzer adds later
are allowed; lists keep their length).

  tests/golden/expect.py ICX-ANALYZE TRACE...   writes TRACE's NAME.analysis.json beside it

Rewrite an analysis only when an analysis deliberately changes, and say so in the commit; never
rewrite a trace."""
import json
import subprocess
import sys


def analysis(analyzer, trace):
    doc = json.loads(subprocess.run([analyzer, "--json", trace], capture_output=True, text=True,
                                    check=True).stdout)
    for section in ("inputs", "processes"):
        for item in doc.get(section, []):
            item.pop("path", None)
    return doc


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    for trace in sys.argv[2:]:
        out = trace[:-len(".icx.zst")] + ".analysis.json"
        with open(out, "w") as f:
            json.dump(analysis(sys.argv[1], trace), f, indent=1, sort_keys=True)
            f.write("\n")
        print("wrote", out)


if __name__ == "__main__":
    main()
