#!/usr/bin/python3
"""Every installed binary has a manual page, and every page says what its binary's --help says.

The pages are made by help2man from each built binary's --help (docs/man). This test takes what the build
installs from `meson introspect --installed` (programs in bindir and sbindir, pages in mandir), runs each
built program's --help, renders its page with man(1), and checks:
- every installed program has a page (section 1 in bindir, 8 in sbindir), and every page a program;
- the page's header names the program and the project's version;
- every line of --help, its whitespace collapsed, is in the rendered page, in the same order (a usage line
  without its "usage:" word, which help2man moves into SYNOPSIS when it recognises it; a heading such as
  "Options:" as the section help2man makes of it, "OPTIONS");
- the options the page names are exactly those --help names (nothing added by the page's extra text).

Usage: man_test.py --build BUILD --source ROOT"""
import os
import re
import subprocess
import sys

from meson_info import Checks, arguments, introspect

OPTION = re.compile(r"(?<![\w./-])(--?[A-Za-z][A-Za-z0-9]*(?:-[A-Za-z0-9]+)*)")
USAGE = re.compile(r"^\s*usage:\s*", re.I)
# What groff makes of ASCII in a UTF-8 locale, back to ASCII.
ASCII = str.maketrans({"\u2010": "-", "\u2011": "-", "\u2212": "-", "\u2018": "'", "\u2019": "'", "\u201c": '"',
                       "\u201d": '"', "\u00b4": "'", "\u02dc": "~", "\u02c6": "^"})
ENV = dict(os.environ, COLUMNS="80", LC_ALL="C.UTF-8", ASAN_OPTIONS="detect_leaks=0")  # as docs/man builds them



def squash(text):
    return " ".join(text.split())


def render(page):
    env = dict(ENV, MANWIDTH="200", MANPAGER="cat", PAGER="cat")
    env.pop("MAN_KEEP_FORMATTING", None)
    done = subprocess.run(["man", "--no-hyphenation", "--no-justification", "--local-file", page],
                          capture_output=True, text=True, env=env, timeout=60)
    return done, done.stdout.translate(ASCII)


def help_lines(text):
    """--help's non-blank lines, whitespace collapsed, a usage line without its "usage:" word."""
    out = []
    for line in text.splitlines():
        line = squash(USAGE.sub("", line))
        if line:
            out.append(line)
    return out


def in_order(lines, page):
    """The lines not found in `page` (collapsed) at or after the previous line's match. A heading line
    ("Options:") may stand as help2man makes a section of it: upper case, no colon ("OPTIONS")."""
    missing, at = [], 0
    for line in lines:
        forms = [line] + ([line[:-1].upper()] if re.fullmatch(r"[A-Za-z][A-Za-z ]*:", line) else [])
        found = [(i, len(f)) for f in forms for i in [page.find(f, at)] if i >= 0]
        if not found:
            missing.append(line)
        else:
            i, n = min(found)
            at = i + n
    return missing


def main():
    a = arguments()
    t = Checks("every installed binary's man page against its --help")
    o = {x["name"]: x["value"] for x in introspect(a.build, "--buildoptions")}
    version = introspect(a.build, "--projectinfo")["version"]
    installed = introspect(a.build, "--installed")

    def under(d):
        return os.path.join(o["prefix"], d)  # an absolute option stays absolute

    programs, pages = {}, {}
    for src, dest in installed.items():
        directory, name = os.path.split(dest)
        if directory in (under(o["bindir"]), under(o["sbindir"])):
            programs[name] = (src, "8" if directory == under(o["sbindir"]) else "1")
        m = re.fullmatch(re.escape(under(o["mandir"])) + r"/man(\d)/(.+)\.(\d)", dest)
        if m and m.group(1) == m.group(3):
            pages[m.group(2)] = (src, m.group(1))
    t.check("the build installs programs (%s)" % ", ".join(sorted(programs)), len(programs) >= 3)
    for name in sorted(set(programs) | set(pages)):
        if name not in pages:
            t.check("%s has a man page" % name, False, "no page among %s" % sorted(pages))
            continue
        if name not in programs:
            t.check("the page %s.%s is of an installed program" % (name, pages[name][1]), False)
            continue
        exe, section = programs[name]
        page, page_section = pages[name]
        t.equal("%s's page is in section %s" % (name, section), page_section, section)
        if not t.check("%s and its page %s are built" % (name, os.path.basename(page)),
                       os.access(exe, os.X_OK) and os.path.isfile(page), "%s, %s" % (exe, page)):
            continue

        done = subprocess.run([exe, "--help"], capture_output=True, text=True, env=ENV, timeout=60)
        if not t.check("%s --help exits 0 and says something" % name, done.returncode == 0 and done.stdout.strip(),
                       "rc=%d\n%s%s" % (done.returncode, done.stdout[-1000:], done.stderr[-1000:])):
            continue
        help_text = done.stdout
        th = next((l for l in open(page, encoding="utf-8") if l.startswith(".TH ")), "")
        t.check("%s's page header names %s %s" % (name, name, version), '"%s %s"' % (name, version) in th, th)
        rendered, text = render(page)
        if not t.check("man renders %s's page" % name, rendered.returncode == 0 and text.strip(),
                       rendered.stderr[-1000:]):
            continue
        page_text = squash(text)
        lines = help_lines(help_text)
        missing = in_order(lines, page_text)
        t.check("every line of %s --help is in its page, in order (%d lines)" % (name, len(lines)), not missing,
                "missing or out of order:\n" + "\n".join(missing[:10]))
        synopsis = re.search(r"\nSYNOPSIS\n(.*?)\n\S", text, re.S)
        usage = [squash(USAGE.sub("", l)) for l in help_text.splitlines() if USAGE.match(l) and USAGE.sub("", l)]
        if synopsis and usage:
            t.check("%s's SYNOPSIS is its --help usage line" % name, usage[0] in squash(synopsis.group(1)),
                    "SYNOPSIS: %r, usage: %r" % (squash(synopsis.group(1)), usage[0]))
        help_options = set(OPTION.findall(help_text))
        page_options = set(OPTION.findall(text))
        t.check("%s's page names exactly the options of its --help (%d)" % (name, len(help_options)),
                help_options == page_options,
                "only in --help: %s; only in the page: %s" % (sorted(help_options - page_options),
                                                             sorted(page_options - help_options)))
    return t.done()


if __name__ == "__main__":
    sys.exit(main())
