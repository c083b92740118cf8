"""Seeded passage sampler for bench/data/pii-docs (see README.md).

Usage: python sample.py OUT.jsonl OUT-sources.tsv
Roots: SITE (installed wheels of the kbgate venv), SDIST (/tmp/piidocs/sdist,
PyPI sdists unpacked), NPM (/tmp/piidocs/npm, `npm pack` tarballs unpacked),
Debian files under /usr/share/doc and /usr/share/man.
Labels are NOT produced here: they were made by hand (labels.txt, applied by label.py).
"""
import glob, gzip, json, os, random, re, subprocess, sys

SEED = 20260611
SITE = "/work/main/.venv/lib/python3.11/site-packages"
SDIST = "/tmp/piidocs/sdist"
NPM = "/tmp/piidocs/npm"

# (category, registry, package, root, relative path, passages)
C, R, A = "changelog", "readme", "credits"
M = []
def add(cat, reg, pkg, root, rel, n):
    M.append((cat, reg, pkg, root, rel, n))

# --- changelog / release notes (Python and npm packages, CPython) ---
for pkg, rel, n in [
    ("pillow", "pillow-13.0.0/CHANGES.rst", 4), ("docutils", "docutils-0.23.1/HISTORY.rst", 4),
    ("pytest", "pytest-9.2.0/doc/en/changelog.rst", 5), ("attrs", "attrs-26.1.0/CHANGELOG.md", 3),
    ("urllib3", "urllib3-2.8.0/CHANGES.rst", 3), ("twisted", "twisted-26.10.0/NEWS.rst", 3),
    ("scrapy", "scrapy-2.19.0/docs/news.rst", 4), ("pygments", "pygments-2.21.0/CHANGES", 4),
    ("click", "click-8.5.1/CHANGES.md", 2), ("flask", "flask-3.1.3/CHANGES.rst", 2),
    ("babel", "babel-2.19.0/CHANGES.rst", 3), ("requests", "requests-2.34.2/HISTORY.md", 3),
    ("python-dateutil", "python_dateutil-4.0.0/NEWS", 4), ("beautifulsoup4", "beautifulsoup4-4.15.0/CHANGELOG", 3),
    ("pyopenssl", "pyopenssl-26.4.0/CHANGELOG.rst", 2), ("sphinx", "sphinx-9.0.4/CHANGES.rst", 1),
]:
    add(C, "PyPI sdist", pkg, SDIST, rel, n)
for rel in ["1.8.16.txt", "1.10.3.txt", "2.2.13.txt", "3.2.19.txt", "4.2.16.txt", "1.4.txt", "5.0.txt"]:
    add(C, "PyPI sdist", "django", SDIST, "django-5.2.19/docs/releases/" + rel, 1)
for pkg, n in [("pydantic-2.14.4", 4), ("python_dotenv-1.2.4", 2), ("pytest_timeout-2.4.0", 1),
               ("charset_normalizer-3.5.3", 2), ("fonttools-4.68.0", 2)]:
    add(C, "PyPI wheel", pkg.split("-")[0], SITE, pkg + ".dist-info/METADATA", n)
for pkg, n in [("axios-1.21.1", 3), ("moment-2.31.0", 2), ("request-2.88.2", 2)]:
    add(C, "npm", pkg.rsplit("-", 1)[0], NPM, pkg + "/package/CHANGELOG.md", n)
add(C, "Debian", "python3.11", "/", "usr/share/doc/python3.11/NEWS.gz", 4)
for rel in ["3.8.rst.txt", "3.9.rst.txt", "3.10.rst.txt", "3.11.rst.txt", "2.7.rst.txt"]:
    add(C, "Debian", "python3.11-doc", "/", "usr/share/doc/python3.11/html/_sources/whatsnew/" + rel, 1)

# --- READMEs and manuals ---
for pkg in ["docker-7.2.0", "redis-8.1.0", "uvicorn-0.54.0", "qdrant_client-1.20.0", "httpx-0.28.1",
            "loguru-0.7.3", "prometheus_client-0.26.0", "phonenumbers-9.0.43", "faker-40.63.0",
            "smart_open-9.0.2", "testcontainers-4.15.0", "tqdm-4.70.1", "tldextract-5.4.0",
            "portalocker-4.4.2", "pyrate_limiter-4.5.1", "litestar-2.25.0", "schemathesis-4.32.5",
            "ruff-0.17.6", "typer-0.27.3", "requests-2.34.2"]:
    add(R, "PyPI wheel", pkg.split("-")[0], SITE, pkg + ".dist-info/METADATA", 1)
for pkg, rel, n in [
    ("django", "django-5.2.19/docs/ref/settings.txt", 3), ("django", "django-5.2.19/docs/ref/django-admin.txt", 2),
    ("django", "django-5.2.19/docs/howto/deployment/wsgi/uwsgi.txt", 1),
    ("django", "django-5.2.19/docs/howto/deployment/asgi/uvicorn.txt", 1),
    ("django", "django-5.2.19/docs/topics/cache.txt", 1),
    ("scrapy", "scrapy-2.19.0/docs/topics/telnetconsole.rst", 1), ("scrapy", "scrapy-2.19.0/docs/topics/security.rst", 1),
    ("urllib3", "urllib3-2.8.0/docs/advanced-usage.rst", 2), ("urllib3", "urllib3-2.8.0/docs/user-guide.rst", 1),
    ("twisted", "twisted-26.10.0/docs/core/howto/servers.rst", 1), ("twisted", "twisted-26.10.0/docs/names/howto/names.rst", 1),
    ("flask", "flask-3.1.3/README.md", 1), ("paramiko", "paramiko-5.1.0/README.rst", 1),
    ("python-dateutil", "python_dateutil-4.0.0/README.rst", 1),
    ("django", "django-5.2.19/docs/howto/deployment/wsgi/gunicorn.txt", 1),
    ("django", "django-5.2.19/docs/ref/request-response.txt", 1),
    ("twisted", "twisted-26.10.0/docs/core/howto/endpoints.rst", 1), ("urllib3", "urllib3-2.8.0/README.md", 1),
]:
    add(R, "PyPI sdist", pkg, SDIST, rel, n)
for pkg, rel in [("express-5.3.0", "Readme.md"), ("ws-8.23.1", "README.md"), ("socket.io-4.8.4", "Readme.md"),
                 ("node-fetch-3.3.2", "README.md"), ("request-2.88.2", "README.md"), ("commander-14.0.3", "Readme.md"),
                 ("yargs-18.2.0", "README.md"), ("axios-1.21.1", "README.md"), ("mocha-12.0.3", "README.md"),
                 ("eslint-10.16.0", "README.md")]:
    add(R, "npm", pkg.rsplit("-", 1)[0], NPM, pkg + "/package/" + rel, 1)
for prog in ["wget.1.gz", "curl.1.gz", "ssh.1.gz", "tar.1.gz"]:
    add(R, "Debian", prog.split(".")[0], "/", "usr/share/man/man1/" + prog, 1)
add(R, "Debian", "nodejs", "/", "usr/share/doc/nodejs/README.md", 1)

# --- AUTHORS / THANKS / credits / logs ---
for pkg, rel, n in [
    ("django", "django-5.2.19/AUTHORS", 6), ("pytest", "pytest-9.2.0/AUTHORS", 3),
    ("pygments", "pygments-2.21.0/AUTHORS", 3), ("sphinx", "sphinx-9.0.4/AUTHORS.rst", 2),
    ("python-dateutil", "python_dateutil-4.0.0/AUTHORS.md", 2), ("babel", "babel-2.19.0/AUTHORS", 2),
    ("docutils", "docutils-0.23.1/THANKS.rst", 2), ("pyopenssl", "pyopenssl-26.4.0/doc/ChangeLog_old.txt", 2),
]:
    add(A, "PyPI sdist", pkg, SDIST, rel, n)
add(A, "Debian", "python3.11", "/", "usr/share/doc/python3.11/ACKS.gz", 5)
for pkg, rel, n in [
    ("coreutils", "THANKS.gz", 3), ("grep", "THANKS.gz", 2), ("sed", "THANKS.gz", 1), ("tar", "THANKS.gz", 2),
    ("gnupg", "THANKS.gz", 2), ("dpkg", "THANKS.gz", 2), ("xz-utils", "THANKS", 1), ("libgcrypt20", "THANKS.gz", 1),
    ("libgnutls30", "THANKS.gz", 1), ("man-db", "THANKS", 1), ("wget", "AUTHORS", 1), ("perl", "AUTHORS.gz", 3),
    ("util-linux", "AUTHORS.gz", 2), ("valgrind", "AUTHORS", 1), ("jq", "AUTHORS.gz", 1), ("make", "AUTHORS", 1),
    ("libgtk2.0-0", "AUTHORS", 1),
    # GNU ChangeLog / git-log style upstream logs (not Debian changelogs)
    ("coreutils", "changelog.gz", 1), ("findutils", "changelog.gz", 1), ("gnupg", "changelog.gz", 1),
    ("wget", "changelog.gz", 1), ("file", "changelog.gz", 1), ("curl", "changelog.gz", 1),
]:
    add(A, "Debian", pkg, "/", "usr/share/doc/%s/%s" % (pkg, rel), n)

# --- top-up stage (second seed, appended after the main sample) ---
# The main sample gave 109 passages with a PERSON, no phone number, no dotted-quad
# version and no timezone offset, so a second pass draws more windows, each of
# which must match a given pattern.
SEED2 = 20260612
CUE = r"[Tt]hanks?\b|\bby @|:user:|[Pp]atch by|[Cc]ontributed by|^\d{4}-\d\d-\d\d  \S"
TOPUP = [
    (R, "PyPI wheel", "phonenumbers", SITE, "phonenumbers-9.0.43.dist-info/METADATA", 2, r"\+\d{10,}|\d{3}-\d{3}-\d{4}"),
    (R, "PyPI sdist", "django", SDIST, "django-5.2.19/docs/ref/settings.txt", 1, r"ADMINS = \["),
    (R, "npm", "eslint", NPM, "eslint-10.16.0/package/README.md", 1, r'alt="[A-Z][a-z]+ [A-Z]'),
    (C, "PyPI sdist", "pytest", SDIST, "pytest-9.2.0/doc/en/changelog.rst", 2, CUE),
    (C, "PyPI sdist", "pillow", SDIST, "pillow-13.0.0/CHANGES.rst", 1, r"^  \[[A-Za-z][\w-]+"),
    (C, "PyPI sdist", "scrapy", SDIST, "scrapy-2.19.0/docs/news.rst", 1, CUE),
    (C, "PyPI sdist", "requests", SDIST, "requests-2.34.2/HISTORY.md", 1, CUE),
    (C, "PyPI sdist", "docutils", SDIST, "docutils-0.23.1/HISTORY.rst", 1, CUE),
    (A, "PyPI sdist", "django", SDIST, "django-5.2.19/AUTHORS", 1, r"@"),
    (A, "Debian", "python3.11", "/", "usr/share/doc/python3.11/ACKS.gz", 1, r"\w"),
] + [(A, "Debian", p, "/", "usr/share/doc/%s/changelog.gz" % p, 1, CUE)
     for p in ["gettext", "diffutils", "sed", "tar", "make"]]
# hard negatives the first pass lacked: dotted quads that are versions, timezone offsets
QUAD = r"(?<![\d.])\d+\.\d+\.\d+\.\d+(?![\d.])"
TZ = r"\d\d:\d\d:\d\d [+-]\d{4}\b"
PYDOC = "usr/share/doc/python3.11/html/_sources/"
TOPUP += [
    (C, "Debian", "python3.11", "/", "usr/share/doc/python3.11/NEWS.gz", 3, QUAD),
    (R, "Debian", "python3.11-doc", "/", PYDOC + "library/ipaddress.rst.txt", 1, QUAD),
    (R, "Debian", "python3.11-doc", "/", PYDOC + "library/email.utils.rst.txt", 1, TZ),
    (C, "Debian", "python3.11-doc", "/", PYDOC + "whatsnew/3.3.rst.txt", 1, TZ),
]

def load(root, rel):
    path = os.path.join(root, rel)
    if "/usr/share/man/" in path:
        env = dict(os.environ, MANWIDTH="80", LC_ALL="C.UTF-8")
        out = subprocess.run(["man", "-E", "UTF-8", "-l", path], capture_output=True, env=env, check=True).stdout
        out = subprocess.run(["col", "-bx"], input=out, capture_output=True, check=True).stdout
        return out.decode("utf-8")
    raw = gzip.open(path).read() if path.endswith(".gz") else open(path, "rb").read()
    return raw.decode("utf-8", errors="replace")

PERSON_CUES = re.compile(r"@|\b(?:[Tt]hanks?|[Cc]ontributed|[Pp]atch(?:ed)? by|[Rr]eported by|by [A-Z]|[Aa]uthor|"
                         r"[Cc]redit|[Cc]ourtesy)\b|<[^>\s]+@|^[A-Z][a-z]+ [A-Z][a-z]+\s*$", re.M)
HARD_NEG = [re.compile(p) for p in [
    r"\b\d+\.\d+\.\d+", r"\b[0-9a-f]{7,40}\b", r"--[a-z][\w-]*", r"CVE-\d{4}-\d+", r"#\d{2,}",
    r"\b\d{1,3}(?:\.\d{1,3}){3}\b", r"[+-]\d{4}\b", r"\b[a-z]+[A-Z]\w+\b|\b[A-Z][A-Z_]{3,}\b",
    r"(?:/[\w.-]+){2,}", r"\b(?:gh|bpo|GH|pr)-?\d+|issue \d+",
]]

def windows(lines, rng, used, tries=40):
    nonblank = [i for i, l in enumerate(lines) if l.strip()]
    for _ in range(tries):
        s = rng.choice(nonblank)
        target = rng.randint(300, 800)
        text, e = "", s
        while e < len(lines):
            cand = text + lines[e]
            if len(cand.rstrip("\n")) > 800:
                break
            text = cand
            e += 1
            if len(text.rstrip("\n")) >= target:
                break
        body = text.rstrip()   # drop trailing blank lines / final newline
        n_lines = body.count("\n") + 1
        end = s + n_lines       # exclusive
        if len(body) < 300 or any(s < b and a < end for a, b in used):
            continue
        yield body, s, end

def score(text):
    p = min(len(PERSON_CUES.findall(text)), 4)
    h = sum(1 for r in HARD_NEG if r.search(text))
    return 2 * p + min(h, 5)

def main(out_jsonl, out_tsv):
    rows = []
    draw(M, random.Random(SEED), rows, lambda w: True, 40)
    used = {}
    for r in rows:
        used.setdefault(r[3], []).append((r[4][1], r[4][2]))
    for cat, reg, pkg, root, rel, n, must in TOPUP:
        pat = re.compile(must, re.M)
        key = rel if root != "/" else "/" + rel
        draw([(cat, reg, pkg, root, rel, n)], random.Random("%d:%s" % (SEED2, key)), rows,
             lambda w: bool(pat.search(w[0])), 20000 if must in (QUAD, TZ) else 400, used.get(key, []))
    write(rows, out_jsonl, out_tsv)

def draw(manifest, rng, rows, ok, tries, used0=()):
    for cat, reg, pkg, root, rel, n in manifest:
        lines = load(root, rel).splitlines(keepends=True)
        used = list(used0)
        for _ in range(n):
            # draw 6 candidate windows; keep the one with most person cues + hard negatives
            cands = []
            for w in windows(lines, rng, used, tries):
                if not ok(w):
                    continue
                cands.append(w)
                if len(cands) == 6:
                    break
            if not cands:
                continue
            best = max(cands, key=lambda w: (score(w[0]), rng.random()))
            used.append((best[1], best[2]))
            rows.append((cat, reg, pkg, rel if root != "/" else "/" + rel, best))

def write(rows, out_jsonl, out_tsv):
    with open(out_jsonl, "w") as fj, open(out_tsv, "w") as ft:
        ft.write("index\tpackage\tfile\tstart_line\tend_line\tregistry\tcategory\n")
        for i, (cat, reg, pkg, rel, (body, s, e)) in enumerate(rows):
            fj.write(json.dumps({"text": body, "entities": []}, ensure_ascii=False) + "\n")
            ft.write("%d\t%s\t%s\t%d\t%d\t%s\t%s\n" % (i, pkg, rel, s + 1, e, reg, cat))
    print(len(rows), "passages")

if __name__ == "__main__":
    main(*sys.argv[1:3])
