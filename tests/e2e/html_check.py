#!/usr/bin/env python3
"""Checks an HTML report from `icx-analyze --html` (docs/HTML.md).

  html_check.py FILE [PNG]   static checks, then (when Debian's chromium is installed) renders
                             FILE headless to PNG (default FILE.png); prints problems, exits 1

As a module: static_problems(text), render(path, png) -> (problems, console lines), and
nonblank_fraction(png).
"""
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib


def static_problems(text):
    """A self-contained page: nothing fetched, one script of ours, charts inline."""
    out = []
    if not text.startswith("<!DOCTYPE html>"):
        out.append("no doctype")
    for m in re.finditer(r'\b(src|href)\s*=\s*"([^"]*)"', text):
        if not m.group(2).startswith("#"):
            out.append("fetches %s=%s" % (m.group(1), m.group(2)[:80]))
    for pat in (r"<link\b", r"@import", r"url\(\s*['\"]?http", r"<iframe", r"<img\b"):
        if re.search(pat, text, re.I):
            out.append("external or embedded resource: %s" % pat)
    if len(re.findall(r"<script\b", text, re.I)) != 1:
        out.append("%d <script> elements, want exactly the report's own"
                   % len(re.findall(r"<script\b", text, re.I)))
    if "<svg" not in text:
        out.append("no inline SVG chart")
    return out


def chromium():
    return shutil.which("chromium") or shutil.which("chromium-browser")


def render(path, png, width=1400, height=3000):
    """Render path with headless Chromium into png.  (problems, console lines): a problem for a
    missing or empty screenshot and for every console error or uncaught exception."""
    exe = chromium()
    if not exe:
        return ["chromium is not installed"], []
    with tempfile.TemporaryDirectory() as prof:
        cmd = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
               "--user-data-dir=" + prof, "--enable-logging=stderr", "--v=0",
               "--hide-scrollbars", "--window-size=%d,%d" % (width, height),
               "--screenshot=" + png, "file://" + os.path.abspath(path)]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    console = [l for l in p.stderr.splitlines() if ":CONSOLE" in l]
    problems = ["console: " + l for l in console
                if re.search(r"error|uncaught|exception|refused", l, re.I)]
    if not os.path.exists(png) or os.path.getsize(png) == 0:
        problems.append("no screenshot (chromium exit %d): %s" % (p.returncode, p.stderr[-800:]))
    elif nonblank_fraction(png) < 0.01:
        problems.append("blank page: %.4f of the rows hold anything" % nonblank_fraction(png))
    return problems, console


def nonblank_fraction(png):
    """The fraction of a PNG's rows that hold anything but one flat colour.  PNG filters make a
    flat row all zeros after its first pixel (Sub, Up, Paeth against a flat row above) or one
    repeated value (None), so a row with content is one with other bytes; no decoder needed."""
    data = open(png, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        return 0.0
    pos, idat, w, h, bpp = 8, b"", 0, 0, 4
    while pos + 8 <= len(data):
        n, typ = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if typ == b"IHDR":
            w, h, depth, ctype = struct.unpack(">IIBB", body[:10])
            bpp = {2: 3, 6: 4, 0: 1, 4: 2}.get(ctype, 4) * max(1, depth // 8)
        elif typ == b"IDAT":
            idat += body
        pos += 12 + n
    raw = zlib.decompress(idat)
    stride, rows = w * bpp, 0
    for y in range(h):
        line = raw[y * (stride + 1) + 1 + bpp:(y + 1) * (stride + 1)]
        if line and max(line.count(0), line.count(line[0])) < len(line) - 2 * bpp:
            rows += 1
    return rows / float(max(1, h))


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    text = open(sys.argv[1], encoding="utf-8").read()
    problems = static_problems(text)
    if chromium():
        p, _ = render(sys.argv[1], sys.argv[2] if len(sys.argv) == 3 else sys.argv[1] + ".png")
        problems += p
    else:
        print("chromium not installed: not rendered")
    for line in problems:
        print(line)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
