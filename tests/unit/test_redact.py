"""The redaction layer: known values and shapes, in text and in the raw stream, however they arrive."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from waaah_agent.core.secrets.redact import MASK, Redactor
from waaah_agent.core.secrets.secretenv import is_secret_name, known_secrets, url_secrets
from waaah_agent.core.secrets.secretscan import native_available

KEY = "AIzaSyD-0123456789abcdefghijklmnopqrstu"
SHAPED = [
    "sk-ant-api03-abcdefghijklmnopqrstuvwxyz012345",
    "sk-proj-abcdefghijklmnopqrstuvwxyz",
    "AIzaSyA-abcdefghijklmnopqrstuvwxyz012345",
    "ya29.a0AfB_byC-abcdefghijklmnopqrstu",
    "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
    "gho_abcdefghijklmnopqrstuvwxyz0123456789",
    "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
    "xoxb-1234567890-abcdefghijklmnop",
    "AKIAIOSFODNN7EXAMPLE",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    "key-0123456789abcdef0123456789abcdef",
    "ant-api03-abcdefghijklmnopqrstuvwxyz",
]
ASSIGNED = [
    "api_key=abcdefgh12345678",
    "Authorization: Bearer abcdefghijklmnop1234",
    '"token": "qwertyuiop123456"',
]


def test_secret_names_and_values():
    for name in (
        "GEMINI_API_KEY",
        "GITHUB_TOKEN",
        "AWS_SECRET_ACCESS_KEY",
        "DB_PASSWORD",
        "NPM_AUTH_TOKEN",
        "WAAAH_API_KEY",
    ):
        assert is_secret_name(name), name
    for name in (
        "GIT_AUTHOR_NAME",
        "SSH_AUTH_SOCK",
        "PATH",
        "KEYBOARD",
        "TOKENIZERS_PARALLELISM",
        "GOOGLE_APPLICATION_CREDENTIALS_FILE",
    ):
        assert not is_secret_name(name), name
    env = {
        "GITHUB_TOKEN": "ghx-" + "a" * 20,
        "MY_SECRET": "short",
        "AUTH_TOKEN_PATH": "/home/u/.t",
        "X_KEY": "a b c d e f g h",
    }
    assert known_secrets(env) == ("ghx-" + "a" * 20,)


def test_strong_words_make_a_secret_name_run_together_too():
    # Names that spell a password, token, secret or DSN without an underscore before it.
    for name in (
        "PGPASSWORD",
        "DBPASSWORD",
        "GITHUBTOKEN",
        "SENTRYDSN",
        "MYSQLPASSWD",
        "APPSECRET",
        "OPENAIAPIKEY",
    ):
        assert is_secret_name(name), name
    # ... and still not the harmless words and counts that hold one, nor where a secret lives.
    for name in (
        "TOKENIZERS_PARALLELISM",
        "MAX_TOKENS",
        "WAAAH_RUN_MAX_TOKENS",
        "OLDPWD",
        "PASSWORD_FILE",
        "PGPASSFILE",
    ):
        assert not is_secret_name(name), name
    env = {"PGPASSWORD": "pg-pass-word-123", "GITHUBTOKEN": "gh-token-value-456"}
    assert known_secrets(env) == ("pg-pass-word-123", "gh-token-value-456")


@pytest.mark.parametrize("secret", SHAPED)
def test_shapes_are_masked_in_text_and_in_the_raw_stream(secret):
    r = Redactor()
    assert secret not in r(f"the value is {secret} here")
    assert secret.encode() not in r.raw(f"\x1b[1mthe value is {secret}\x1b[0m here\r\n".encode())


@pytest.mark.parametrize("text", ASSIGNED)
def test_assignments_keep_their_name_and_lose_their_value(text):
    r = Redactor()
    masked = r(text)
    assert MASK in masked and text.split("=")[0].split(":")[0] in masked
    assert MASK.encode() in r.raw(text.encode())


def test_a_known_value_with_escapes_between_its_characters_is_masked():
    r = Redactor([KEY])
    spread = "".join(f"{c}\x1b[3{i % 8}m" for i, c in enumerate(KEY)).encode()
    masked = r.raw(b"before " + spread + b" after")
    assert MASK.encode() in masked and b"before" in masked and b"after" in masked
    assert KEY.encode() not in masked.replace(b"\x1b", b"")


def cast_stream(r: Redactor, chunks: list[bytes]) -> bytes:
    """What SessionLogs writes to the .cast: a token-like word at the end held back as it came,
    the rest masked, and of that a tail where a known value may go on held back."""
    from waaah_agent.core.secrets.shapes import word_from

    out, hold = b"", b""
    for chunk in chunks:
        data = hold + chunk
        word = word_from(data)
        masked = r.raw(data[:word])
        cut = r.hold_from(masked)
        out, hold = out + masked[:cut], masked[cut:] + data[word:]
    return out + r.raw(hold)


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 60), st.sampled_from([KEY, *SHAPED[:6]]), st.text("abc \n\x1b[0m", max_size=40))
def test_a_secret_split_across_reads_anywhere_is_still_masked(cut_every, secret, filler):
    r = Redactor([KEY])
    data = f"{filler}token {secret} tail{filler}".encode()
    chunks = [data[i : i + cut_every] for i in range(0, len(data), cut_every)]
    out = cast_stream(r, chunks)
    assert secret.encode() not in out and MASK.encode() in out
    assert out.replace(MASK.encode(), b"").startswith(filler.encode())  # nothing else lost


def test_nothing_is_held_back_for_ever_and_plain_output_passes_untouched():
    r = Redactor([KEY])
    data = b"\x1b[2J\x1b[H> Type your message or @path/to/file\r\n   no sandbox   gemini-2.5-pro\r\n"
    assert r.raw(data) == data and r.hold_from(data) == len(data)
    assert r.hold_from(b"partial AIzaSyD-0123") < len(b"partial AIzaSyD-0123")  # may go on: held


def test_nested_values_are_masked_in_json_like_documents():
    r = Redactor([KEY])
    doc = {"argv": ["gemini", f"--key={KEY}"], "tail": [f"Bearer {'x' * 20}"], "n": 3}
    masked = r.value(doc)
    assert KEY not in str(masked) and "x" * 20 not in str(masked) and masked["n"] == 3


def test_a_key_learned_later_is_masked_from_then_on():
    r = Redactor()
    r.add("waaah-live-key-123")
    r.add("short")  # too short to mask everywhere
    assert r("key waaah-live-key-123 short") == f"key {MASK} short"


# The pieces of every shape (anchors in both cases, URLs, webhooks, assignments) and filler.
_SHAPE_PIECES = [
    *("sk-ant-", "sk-", "AIza", "ya29.", "ghp_", "github_pat_", "xoxb-", "AKIA", "eyJ", "."),
    *("BeArEr ", "bearer ", "key-", "ant-api", "api_key=", "Token: ", "PASSWORD=", "Secret", "passwd"),
    *("credentials", "Authorization", "=", ": ", "://", "user:", "@host", "hooks.slack.com/services/"),
    *(
        "webhook",
        "0123456789abcdefABCDEF",
        "abcdefghijklmnop",
        "_-",
        " ",
        "\n",
        '"',
        "lorem ipsum ",
        "\u00e9",
    ),
]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_SHAPE_PIECES), max_size=30))
def test_shapes_looked_for_only_by_their_anchors_mask_the_same(parts):
    """The anchor check before each shape's pattern (one native pass over an ASCII text, a
    search per anchor otherwise) never lets a shape through."""
    from waaah_agent.core.secrets.redact import _keep_prefix
    from waaah_agent.core.secrets.shapes import TEXT_SHAPES

    text = "".join(parts)
    everything = text
    for pattern in TEXT_SHAPES:
        everything = pattern.sub(_keep_prefix, everything)
    assert Redactor()(text) == everything


_SCANS: list = []  # (native, python), compiled once for all the examples


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            ["AIza", "SyD-0123", "456789ab", "c", "\x1b[1m", "\x1b[0m", "\r", "\x08", "\x1b[5;9H", " ", "x"]
        ),
        max_size=30,
    )
)
def test_the_python_search_finds_what_the_native_one_finds(pieces):
    """Where hyperscan has no wheels the same runs are found, spread or not, in Python."""
    from waaah_agent.core.secrets.secretscan import SecretScan, merge

    if not _SCANS:
        _SCANS.extend([SecretScan([KEY.encode()]), SecretScan([KEY.encode()], native=False)])
    data = "".join(pieces).encode()
    native, python = _SCANS
    assert merge(native.spans(data)[0]) == merge(python.spans(data)[0])
    assert native.run_tail(data, 512) == python.run_tail(data, 512)


def test_a_long_text_without_anchors_is_one_native_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    """64 MB of answer is 8,000 texts of 8 KB in a run's log: one native pass over each, not a
    search per anchor (compared on the same machine in the same test: the figures are printed)."""
    import time

    import waaah_agent.core.secrets.redact as redact

    redactor = Redactor(["a-known-secret-value-1234"])
    text = ("lorem ipsum dolor sit amet, consectetur adipiscing elit " * 150)[:8192]

    def cpu() -> float:
        best = float("inf")
        for _ in range(3):
            start = time.process_time()
            for _ in range(500):
                assert redactor(text) == text
            best = min(best, time.process_time() - start)
        return best

    native = cpu()
    monkeypatch.setattr(redact, "_shapes_present", lambda _text: None)
    one_by_one = cpu()
    print(f"4 MB of anchor-free text: {native:.3f} s of CPU, {one_by_one:.3f} s anchor by anchor")
    if native_available():
        assert native < one_by_one / 2, (native, one_by_one)


# -- the raw stream's shapes, tried only where they may begin -----------------------------------
def _whole_chunk(data: bytes) -> bytes:
    """The reference: each shape's pattern, then the assignments', over the whole chunk."""
    from waaah_agent.core.secrets.redact import _keep_raw_prefix
    from waaah_agent.core.secrets.shapes import RAW_ASSIGN, RAW_SHAPES

    for _, pattern in RAW_SHAPES:
        data = pattern.sub(_keep_raw_prefix, data)
    return RAW_ASSIGN.sub(_keep_raw_prefix, data)


RAW_PIECES = [
    *SHAPED, "api_key = ", "TOKEN:", "'Authorization': 'Bearer ", "Authorization: BeArEr ", "x_token=",
    "9token=", "my-api_key=", 'passwd :  "', "client_secret=", "credentials:", "token\t=\t'", "key-",
    "abcdefgh12345678", "[REDACTED]", "short", "os.environ['X']", " ", "\n", "\r\n", "\x1b[1m", ",", ";",
    "=", ":", "'", '"', "-", "_", "keyboard", "monkey", "bearer ", "sk-", "AIza", "eyJ", "ghp_", "q" * 300,
    "  " * 150, "total_tokens", "é",
]  # fmt: skip


@settings(max_examples=1500, deadline=None)
@given(st.lists(st.sampled_from(RAW_PIECES), max_size=25))
def test_raw_shapes_mask_what_their_patterns_mask_over_the_whole_chunk(pieces):
    data = "".join(pieces).encode()
    assert Redactor().raw(data) == _whole_chunk(data)


def test_raw_assignments_without_the_native_search_mask_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    from waaah_agent.core.secrets import redact
    from waaah_agent.core.secrets.secretscan import MatchEnds

    data = "".join(RAW_PIECES * 3).encode()
    native = Redactor().raw(data)
    monkeypatch.setattr(redact._raw_shapes(), "assign_ends", MatchEnds(b"x", native=False))
    assert Redactor().raw(data) == native == _whole_chunk(data)


def test_each_raw_shape_begins_with_one_of_its_starts():
    from waaah_agent.core.secrets.shapes import RAW_SHAPES, RAW_STARTS

    assert len(RAW_STARTS) == len(RAW_SHAPES)
    text = " ".join(SHAPED + ["Bearer abcdefghijklmnop", "bEaReR abcdefghijklmnop"]).encode()
    matched = 0
    for (_, pattern), (starts, caseless) in zip(RAW_SHAPES, RAW_STARTS, strict=True):
        for m in pattern.finditer(text):
            begins = m.group(0).lower() if caseless else m.group(0)
            assert begins.startswith(starts), (pattern.pattern, m.group(0))
            matched += 1
    assert matched >= len(RAW_SHAPES)


def test_code_that_names_keys_and_tokens_is_masked_at_a_fraction_of_the_whole_chunk_cost():
    """An agent printing source code: its chunks hold the anchors (key, token, auth) nearly
    always; the shapes were tried at each of its bytes in Python (this package's own sources:
    ~26 s per 100 MB), now where they may begin (~0.35 s). Asserted: less than a quarter."""
    import time
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "waaah_agent"
    source = b"".join(p.read_bytes() for p in sorted(root.rglob("*.py"))).replace(b"\n", b"\r\n")
    batches = [source[at : at + 262144] for at in range(0, len(source), 262144)]
    red = Redactor([KEY])

    def cpu(work) -> float:
        best = float("inf")
        for _ in range(3):
            started = time.process_time()
            for batch in batches:
                work(batch)
            best = min(best, time.process_time() - started)
        return best

    now, before = cpu(red.raw), cpu(_whole_chunk)
    print(f"{len(source) / 1e6:.1f} MB of source: {now:.3f} s masked, {before:.3f} s the whole-chunk way")
    assert [Redactor().raw(b) for b in batches] == [_whole_chunk(b) for b in batches]
    if native_available():
        assert now < before / 4, (now, before)


@pytest.mark.parametrize(
    ("line", "value"),
    [
        ('    api_key = "s3cr3t-v4lue-0123456789"\n', "s3cr3t-v4lue-0123456789"),
        ("token: 'qwertyuiop123456' and more\n", "qwertyuiop123456"),
        ("export CLIENT_SECRET=abcdefgh12345678\n", "abcdefgh12345678"),
        ("Authorization: Bearer abcdefghijklmnop1234\n", "abcdefghijklmnop1234"),
    ],
)
def test_an_assignment_cut_by_the_reads_anywhere_is_still_masked(line, value):
    """Between its name and its ":" or "=" too: the name is held back until the rest came."""
    data = ("x = 1\n" + line * 3).encode()
    r = Redactor()
    for cut in range(1, len(data)):
        out = cast_stream(r, [data[:cut], data[cut:]])
        assert out.count(b"[REDACTED]") == 3, (cut, out)
        for at in range(len(value) - 7):  # not 8 of its characters in a row, even its end
            assert value[at : at + 8].encode() not in out, (cut, out)


def test_a_private_key_s_body_is_masked_however_long_and_json_stays_json():
    body = "\n".join(
        "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7" + str(i % 10) * 12 for i in range(40)
    )
    key = f"-----BEGIN RSA PRIVATE KEY-----\n{body}\n-----END RSA PRIVATE KEY-----\n"
    r = Redactor()
    masked = r(f"the context:\n{key}and more")
    assert (
        masked
        == f"the context:\n-----BEGIN RSA PRIVATE KEY-----{MASK}-----END RSA PRIVATE KEY-----\nand more"
    )
    line = r(json.dumps({"record": "start", "prompt": f"<context>\n{key}</context>\nhi", "n": 1}))
    assert json.loads(line)["prompt"].startswith(f"<context>\n-----BEGIN RSA PRIVATE KEY-----{MASK}-----END")
    cut = r(json.dumps({"prompt": key[:300]}))  # a block cut by --context-max: masked to its end
    assert json.loads(cut) == {"prompt": f"-----BEGIN RSA PRIVATE KEY-----{MASK}"}


def test_an_alert_url_s_secret_parts_are_masked_never_its_scheme_nor_its_host():
    urls = {
        "json://127.0.0.1:8080/hook-secret-token-123": ["hook-secret-token-123"],
        "tgram://123456789:AAHdefGHIjklMNO/-100987654321": ["123456789:AAHdefGHIjklMNO", "-100987654321"],
        "discord://112233445566/webhook-token-value": ["112233445566", "webhook-token-value"],
        "mailto://someone:pass%40word1@smtp.example.com:587": ["someone:pass%40word1", "pass@word1"],
        "ntfys://ntfy.sh/my-night?auth=tk_abcdef123456": ["my-night", "tk_abcdef123456"],
        "json://localhost:9000": [],
    }
    for url, secret in urls.items():
        found = url_secrets(url)
        assert set(secret) <= set(found), (url, found)
        r = Redactor()
        r.extend(found)
        line = f"alert sent to {url}; metrics on 127.0.0.1:8080, smtp.example.com:587, ntfy.sh"
        masked = r(line)
        assert all(s not in masked for s in secret), masked
        assert "127.0.0.1:8080, smtp.example.com:587, ntfy.sh" in masked, masked
        assert url.split("://")[0] + "://" in masked
    # The same from WAAAH_NOTIFY (space-separated): the parts, not the whole URLs.
    env = {"WAAAH_NOTIFY": "json://127.0.0.1:8080/hook-secret-token-123 ntfys://ntfy.sh/my-night"}
    assert known_secrets(env) == ("hook-secret-token-123", "my-night")


# What a terminal shows nothing of, put between each two characters of a key: the terminal shows
# the key (with a combining mark, the key's characters marked: still the key to a reader).
FILLERS = {
    "zero-width space": "\u200b",
    "zero-width joiner": "\u200d",
    "word joiner": "\u2060",
    "zero-width no-break space": "\ufeff",
    "soft hyphen": "\u00ad",
    "combining acute accent": "\u0301",
    "variation selector": "\ufe0f",
    "DCS string": "\x1bP+q\x1b\\",
    "APC string": "\x1b_Gi=1;OK\x07",
    "PM string": "\x1b^note\x1b\\",
    "NUL": "\x00",
    "BEL": "\x07",
    "DEL": "\x7f",
}


@pytest.mark.parametrize("filler", FILLERS.values(), ids=FILLERS.keys())
def test_a_key_with_a_filler_between_each_two_characters_is_masked_in_the_cast_and_the_text_log(
    tmp_path, filler
):
    from waaah_agent.core.secrets import separators
    from waaah_agent.runtime.supervise.logfiles import replay
    from waaah_agent.runtime.supervise.logs import SessionLogs

    logs = SessionLogs(tmp_path, "sim", (80, 24), Redactor([KEY]))
    logs.output(f"before\r\nKEY8 {filler.join(KEY)} end\r\nafter\r\n".encode())
    logs.close()
    cast = replay(logs.cast_path)
    assert b"before\r\nKEY8 [REDACTED] end\r\nafter\r\n" in cast
    log = logs.text_path.read_text()
    assert " KEY8 [REDACTED] end\n" in log and " before\n" in log and " after\n" in log
    shown = separators.visible(cast)[0].decode() + separators.visible(log.encode())[0].decode()
    assert not any(KEY[i : i + 8] in shown for i in range(len(KEY) - 7))


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 40), st.sampled_from(list(FILLERS.values())))
def test_a_key_with_fillers_cut_into_reads_anywhere_leaves_no_run_in_the_record(cut_every, filler):
    from waaah_agent.core.secrets import separators

    r = Redactor([KEY])
    data = f"KEY8 {filler.join(KEY)} end\r\n".encode()
    out = cast_stream(r, [data[i : i + cut_every] for i in range(0, len(data), cut_every)])
    shown = separators.visible(out)[0].decode("utf-8", "replace")
    assert MASK in shown and shown.endswith(" end\n")
    assert not any(KEY[i : i + 8] in shown for i in range(len(KEY) - 7)), shown
