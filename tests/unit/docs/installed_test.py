#!/usr/bin/python3
"""`meson install` installs every doc the README names, where the README's and the docs' relative links find
them: README.md at <datadir>/doc/phub, docs/X beside it as docs/X. Then every relative link of every installed
Markdown file ([text](target), ![plot](file.png)) resolves to another installed file, so the installed copy
reads as the tree does. What is installed comes from `meson introspect --installed` (nothing is installed).

Usage: installed_test.py --build BUILD --source ROOT"""
import os
import re
import sys

from meson_info import Checks, arguments, introspect

LINK = re.compile(r"\]\(([^)\s]+)\)")
NAMED = re.compile(r"(?<![\w/.-])(docs/[\w./-]+\.(?:md|png|json))")



def relative_links(text):
    """Relative link targets of a Markdown text, without #anchors (web links and pure anchors left out)."""
    out = []
    for target in LINK.findall(text):
        if re.match(r"^[a-z]+:", target) or target.startswith("#"):
            continue
        out.append(target.split("#", 1)[0])
    return out


def main():
    a = arguments()
    root = os.path.realpath(a.source)
    t = Checks("the docs the README names are installed, and their links hold there")
    options = {o["name"]: o["value"] for o in introspect(a.build, "--buildoptions")}
    docdir = os.path.join(options["prefix"], options["datadir"], "doc", "phub")
    # source file -> installed path, for files that come from the source tree
    installed = {os.path.realpath(src): dest for src, dest in introspect(a.build, "--installed").items()}
    readme = os.path.join(root, "README.md")
    t.equal("README.md is installed at the top of the doc directory", installed.get(readme),
            os.path.join(docdir, "README.md"))

    text = open(readme, encoding="utf-8").read()
    named = sorted(set(NAMED.findall(text)) | {l for l in relative_links(text) if l.startswith("docs/")})
    t.check("the README names docs (found %d)" % len(named), len(named) >= 10, repr(named))
    for rel in named:
        src = os.path.join(root, rel)
        if not t.check("README names %s, which exists" % rel, os.path.isfile(src)):
            continue
        t.equal("%s is installed as %s" % (rel, os.path.join(docdir, rel)), installed.get(os.path.realpath(src)),
                os.path.join(docdir, rel))

    # Every installed Markdown file's relative links resolve among the installed files.
    installed_paths = set(installed.values())
    pages = sorted((src, dest) for src, dest in installed.items() if dest.startswith(docdir + "/") and
                   dest.endswith(".md"))
    t.check("Markdown docs are installed (%d)" % len(pages), len(pages) >= 10)
    for src, dest in pages:
        links = relative_links(open(src, encoding="utf-8").read())
        broken = [l for l in links if os.path.normpath(os.path.join(os.path.dirname(dest), l)) not in installed_paths]
        t.check("every relative link of the installed %s resolves (%d links)" % (os.path.relpath(dest, docdir),
                                                                                 len(links)), not broken,
                "not installed: %s" % broken)
    return t.done()


if __name__ == "__main__":
    sys.exit(main())
