"""Markdown output of the reports: table cells, human-readable values, and writing a report."""

import math
import os
import sys


def cell(text):
    """Text safe inside a Markdown table cell."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def write(text, output, who="jaxbench"):
    """Write a report to ``output``, or to standard output when ``output`` is empty."""
    if output:
        os.makedirs(os.path.dirname(os.path.abspath(output)), exist_ok=True)
        with open(output, "w") as f:
            f.write(text)
        print(f"{who}: wrote {output}", file=sys.stderr)
    else:
        sys.stdout.write(text)


def counted(n, noun):
    """``n`` and its noun, plural unless ``n`` is one: "1 spell", "0 spells", "3 spells"."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def percent(x):
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:.1f}%"
