#!/bin/sh
# Builds the pure-Python wheels in this directory from Debian trixie's
# packages, for the end-to-end tests of Python's own HTTP clients
# (cmd/mcp-run-python/e2e_net_test.go): urllib3 2.x has the Emscripten
# backend those tests need, and requests runs on it. PyPI is not reachable
# where these tests were written; Debian is, but it removes superseded
# versions from its pool, so the wheels are built once and committed rather
# than fetched at test time.
#
#   sh testdata/wheels/build.sh     # needs python3 and deb.debian.org
#
# The .debs are downloaded once into $TMPDIR/mcp-run-python-debs. Each is
# checked against the sha256 below (from trixie's
# main/binary-all/Packages) and unpacked with Python's own ar and tar
# readers; its dist-packages tree becomes a py3-none-any wheel with a
# RECORD, Debian's METADATA (certifi's from its egg-info PKG-INFO) and
# Debian's copyright file as the wheel's licence file. Entries are sorted
# and dated 1980-01-01, so the same .debs give the same bytes.
#
# Three changes to Debian's files, for the tests' index:
# - requests' METADATA requires chardet rather than charset_normalizer:
#   Debian's charset-normalizer is not architecture-independent, and
#   requests takes either (requests/compat.py).
# - urllib3 gets upstream's fix for urllib3#3555 (PR #3556, in 2.4.0): its
#   Emscripten backend took a short read (one JavaScript chunk) for the end
#   of the body, so a streamed response (requests streams) was cut short.
#   Pyodide's own urllib3 is newer; the tests fetch bodies of 2 MiB.
# - certifi's bundle: Debian's certifi has none (its where() names
#   /etc/ssl/certs, which Pyodide lacks, and requests reads the bundle as it
#   is imported), so certifi/cacert.pem is made of ca-certificates' Mozilla
#   certificates, the source of upstream certifi's, and core.py's where()
#   names it, as upstream's does. (https itself goes through fetch, which
#   verifies on its own.)
set -eu
cd "$(dirname "$0")"
python3 - <<'PY'
import base64, hashlib, io, os, tarfile, tempfile, urllib.request, zipfile

MIRROR = 'http://deb.debian.org/debian/'
DEBS = [
    # (pool path, sha256, project, version, import packages)
    ('pool/main/p/python-urllib3/python3-urllib3_2.3.0-3+deb13u2_all.deb',
     '8132c30c09060562e540025a5d5b1ee9dd3496234c36eab57339e8b94f9e6b38', 'urllib3', '2.3.0', ['urllib3']),
    ('pool/main/r/requests/python3-requests_2.32.3+dfsg-5+deb13u1_all.deb',
     '7d271bd47c6647b16aec9facc656c39eca763062ec392aea615dd6597b8304c2', 'requests', '2.32.3', ['requests']),
    ('pool/main/p/python-idna/python3-idna_3.10-1+deb13u1_all.deb',
     '5cf05020b0e5c523ace373a4feac7e074de3e95df30b5a2d584842accba6e60b', 'idna', '3.10', ['idna']),
    ('pool/main/p/python-certifi/python3-certifi_2025.1.31+ds-1_all.deb',
     '939b1a979218ec23b5f9469e2ad8a809de588f586bbaf3292b4e617d987824bd', 'certifi', '2025.1.31', ['certifi']),
    ('pool/main/c/chardet/python3-chardet_5.2.0+dfsg-2_all.deb',
     '06d26a4755a176d56d3c68510fe35f394b86640003360b9c6ad047d9a35268bc', 'chardet', '5.2.0', ['chardet']),
]
# certifi's bundle: Mozilla's certificates as Debian ships them.
CA_DEB = ('pool/main/c/ca-certificates/ca-certificates_20250419_all.deb',
          'ef590f89563aa4b46c8260d49d1cea0fc1b181d19e8df3782694706adf05c184')
CERTIFI_CORE = '''\"\"\"certifi's where() and contents(), as upstream's: the bundle next to this file
(made by mcp-run-python's testdata/wheels/build.sh from Debian's ca-certificates).\"\"\"

import os


def where() -> str:
    return os.path.join(os.path.dirname(__file__), 'cacert.pem')


def contents() -> str:
    with open(where(), encoding='ascii') as data:
        return data.read()
'''
SITE = './usr/lib/python3/dist-packages/'
# Downloads are kept here between runs; the wheels go into this directory.
CACHE = os.path.join(tempfile.gettempdir(), 'mcp-run-python-debs')
os.makedirs(CACHE, exist_ok=True)


def deb_members(data):
    """The members of an ar archive (a .deb), by name."""
    assert data[:8] == b'!<arch>\n', 'not an ar archive'
    pos, out = 8, {}
    while pos < len(data):
        head = data[pos:pos + 60]
        name, size = head[:16].decode().strip().rstrip('/'), int(head[48:58])
        out[name] = data[pos + 60:pos + 60 + size]
        pos += 60 + size + (size & 1)
    return out


def unpack(path, sha):
    """The regular files of the .deb at path in the pool, by path ('./usr/...')."""
    deb = os.path.join(CACHE, os.path.basename(path))
    if not os.path.exists(deb):
        print('fetching', MIRROR + path)
        with urllib.request.urlopen(MIRROR + path) as r, open(deb + '.part', 'wb') as f:
            f.write(r.read())
        os.replace(deb + '.part', deb)
    data = open(deb, 'rb').read()
    if hashlib.sha256(data).hexdigest() != sha:
        raise SystemExit(f'{deb}: sha256 mismatch')
    members = deb_members(data)
    name = next(n for n in members if n.startswith('data.tar'))
    tree = {}
    with tarfile.open(fileobj=io.BytesIO(members[name])) as tar:
        for m in tar.getmembers():
            if m.isfile():
                tree[m.name if m.name.startswith('./') else './' + m.name] = tar.extractfile(m).read()
    return tree


for path, sha, project, version, packages in DEBS:
    tree = unpack(path, sha)
    dist = f'{project}-{version}.dist-info'
    files = {}
    for p, body in tree.items():
        if not p.startswith(SITE) or '__pycache__' in p or p.endswith('.pyc'):
            continue
        rel = p[len(SITE):]
        top = rel.split('/')[0]
        if top in packages:
            files[rel] = body
        elif top.endswith(('.dist-info', '.egg-info')):
            base = rel.split('/', 1)[1]
            if base == 'METADATA' or base == 'PKG-INFO':
                files[f'{dist}/METADATA'] = body
            elif base in ('top_level.txt', 'entry_points.txt'):
                files[f'{dist}/{base}'] = body
    if project == 'urllib3':
        path = 'urllib3/contrib/emscripten/response.py'
        short = '''                if (self.length_is_certain and self.length_remaining == 0) or len(
                    data
                ) < amt:
'''
        fixed = '''                if (self.length_is_certain and self.length_remaining == 0) or len(
                    data
                ) == 0:
'''
        text = files[path].decode()
        assert text.count(short) == 1, 'urllib3#3555 is not where it was'
        files[path] = text.replace(short, fixed).encode()
    md = files[f'{dist}/METADATA'].decode()
    if project == 'requests':
        md = md.replace('Requires-Dist: charset_normalizer<4,>=2\n', 'Requires-Dist: chardet<6,>=3.0.2\n')
        assert 'charset_normalizer<' not in md
    files[f'{dist}/METADATA'] = md.encode()
    files[f'{dist}/licenses/copyright'] = tree[f'./usr/share/doc/python3-{project}/copyright']
    if project == 'certifi':
        ca = unpack(*CA_DEB)
        mozilla = './usr/share/ca-certificates/mozilla/'
        files['certifi/cacert.pem'] = b''.join(ca[p] for p in sorted(ca) if p.startswith(mozilla))
        files['certifi/core.py'] = CERTIFI_CORE.encode()
        files[f'{dist}/licenses/ca-certificates-copyright'] = ca['./usr/share/doc/ca-certificates/copyright']
    files[f'{dist}/WHEEL'] = (
        'Wheel-Version: 1.0\nGenerator: testdata/wheels/build.sh\nRoot-Is-Purelib: true\nTag: py3-none-any\n'
    ).encode()
    def digest(b):
        return base64.urlsafe_b64encode(hashlib.sha256(b).digest()).rstrip(b'=').decode()

    record = ''.join(f'{p},sha256={digest(b)},{len(b)}\n' for p, b in sorted(files.items()))
    files[f'{dist}/RECORD'] = (record + f'{dist}/RECORD,,\n').encode()
    out = f'{project}-{version}-py3-none-any.whl'
    with zipfile.ZipFile(out, 'w', zipfile.ZIP_DEFLATED) as z:
        for p in sorted(files):
            info = zipfile.ZipInfo(p, date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, files[p])
    print(out, hashlib.sha256(open(out, 'rb').read()).hexdigest())
PY
