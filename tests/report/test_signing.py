"""Signed PDFs (auditor/report/signing.py): a report rendered with the property's key is
signed PAdES-B-B and pyHanko validates it against the test's own CA; one byte changed after
signing, or bytes appended, fail the validation; a certificate of another CA is not trusted;
without a key the cover says the PDF is unsigned; every problem with the key is one sentence.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pypdf
import pytest
from helpers.keys import KeyFiles, make_key
from helpers.pdfs import pdf_text

from auditor import config
from auditor.audit.run import audit
from auditor.config import PropertyConfig, SigningConfig
from auditor.errors import UserError
from auditor.ingest.run import ingest
from auditor.report import gather, render, signing
from auditor.simulate.planted import simulate
from auditor.store import db, runs

ZONE = "America/New_York"
SHIFT = "2026-11-28/grave"


@pytest.fixture(scope="module")
def night(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small night with findings: one table, one hour."""
    tmp = tmp_path_factory.mktemp("signing")
    r = simulate(tmp / "logs", tables=1, hours=1, seed=7, deviation_rate=0.05,
                 day=dt.date(2026, 11, 28))
    path = tmp / "audit.duckdb"
    con = db.connect(path)
    ingest(con, r.files, runs.start(con, "ingest", {}))
    audit(con, runs.start(con, "audit", {}), PropertyConfig(time_zone=ZONE))
    con.close()
    return path


@pytest.fixture(scope="module")
def key(tmp_path_factory: pytest.TempPathFactory) -> KeyFiles:
    return make_key(tmp_path_factory.mktemp("key"))


def _conf(key: KeyFiles | None, trust: bool = True) -> PropertyConfig:
    signing_conf = None
    if key is not None:
        secret = key.p12.parent / "password"
        secret.write_text(key.password + "\n")  # one final newline: the editor's
        signing_conf = SigningConfig(key.p12, secret, None, key.ca_pem if trust else None)
    return PropertyConfig(name="Harbor Point Casino", time_zone=ZONE, signing=signing_conf)


def _render(night: Path, conf: PropertyConfig, out: Path) -> Path:
    con = db.connect(night, read_only=True)
    try:
        return render.write_report(con, conf, gather.scope_for(conf, con, shift=SHIFT), out)
    finally:
        con.close()


def _first_page(pdf: Path) -> str:
    return pdf_text(pdf, pages=1)


@pytest.fixture(scope="module")
def signed(night: Path, key: KeyFiles, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _render(night, _conf(key), tmp_path_factory.mktemp("signed") / "grave.pdf")


@pytest.mark.slow  # renders the report
def test_a_report_signed_with_the_configured_key_validates_against_its_ca(
    signed: Path, key: KeyFiles
) -> None:
    status = signing.signature_status(signed, key.ca_pem)
    assert status.ok, status.problem
    [sig] = status.signatures
    assert (sig.field, sig.signer, sig.cert_sha256) == ("bacc-audit", key.subject,
                                                        key.cert_sha256)
    assert (sig.intact, sig.valid, sig.trusted, sig.whole_file, sig.pades) == (
        True, True, True, True, True
    )
    assert sig.signer == "CN=Compliance Officer,O=Harbor Point Casino"
    assert sig.signed_at is not None
    assert abs(sig.signed_at - dt.datetime.now(dt.UTC)) < dt.timedelta(minutes=10)
    page = _first_page(signed)
    assert ("Digitally signed (PAdES-B-B) with the certificate of CN=Compliance Officer,"
            "O=Harbor Point Casino, issued by CN=Harbor Point Test CA,O=Harbor Point Casino"
            in page)
    assert key.cert_sha256 in page.replace(" ", "")
    # The findings and the ledger head stay attached under the signature.
    attached = pypdf.PdfReader(signed).attachments
    assert sorted(attached) == ["findings.csv", "findings.jsonl", "ledger.json"]


@pytest.mark.slow  # renders the report
def test_one_byte_changed_after_signing_fails_validation(signed: Path, key: KeyFiles,
                                                         tmp_path: Path) -> None:
    data = bytearray(signed.read_bytes())
    data[1000] ^= 0x01  # inside the rendered report, which the signature covers
    tampered = tmp_path / "tampered.pdf"
    tampered.write_bytes(bytes(data))
    status = signing.signature_status(tampered, key.ca_pem)
    assert not status.ok
    [sig] = status.signatures
    assert (sig.intact, sig.signer) == (False, key.subject)
    assert status.problem == (
        "signature 'bacc-audit': the bytes it signed were changed after signing (their digest "
        "no longer matches)"
    )
    assert status.sentence() == f"{tampered}: {status.problem}"


@pytest.mark.slow  # renders the report
def test_bytes_appended_after_the_signature_fail_validation(signed: Path, key: KeyFiles) -> None:
    status = signing.signature_status(signed.read_bytes() + b"\n% a line added later\n",
                                      key.ca_pem)
    assert not status.ok
    assert status.signatures[0].intact and not status.signatures[0].whole_file
    assert status.problem == (
        "bytes were appended after signature 'bacc-audit': the file is no longer the one signed"
    )


@pytest.mark.slow  # renders the report
def test_a_certificate_of_another_ca_is_not_trusted(
    signed: Path, key: KeyFiles, tmp_path: Path
) -> None:
    other = make_key(tmp_path / "other", ca_cn="Some Other CA")
    status = signing.signature_status(signed, other.ca_pem)
    assert not status.ok
    assert status.signatures[0].trusted is False
    assert status.problem == (
        f"signature 'bacc-audit': its certificate ({key.subject}) does not chain to the trust "
        "root"
    )
    # Without a trust root only the PDF's own certificate is checked: it holds.
    alone = signing.signature_status(signed)
    assert alone.ok and alone.signatures[0].trusted is None


@pytest.mark.slow  # renders the report
def test_without_a_key_the_cover_says_the_pdf_is_unsigned(night: Path, tmp_path: Path) -> None:
    pdf = _render(night, _conf(None), tmp_path / "plain.pdf")
    assert ("Unsigned: no signing key is configured ([signing] in the property config), so "
            "this PDF carries no digital signature." in _first_page(pdf))
    status = signing.signature_status(pdf)
    assert (status.signed, status.ok, status.problem) == (
        False, False, "carries no digital signature"
    )


@pytest.mark.slow  # renders the report
def test_two_signed_renders_differ_in_their_signature_only(
    night: Path, key: KeyFiles, signed: Path, tmp_path: Path
) -> None:
    """The rendered report stays byte-deterministic; the signature is an incremental update
    after it, with its own time."""
    again = _render(night, _conf(key), tmp_path / "again.pdf").read_bytes()
    first = signed.read_bytes()
    end = first.index(b"%%EOF") + len(b"%%EOF")
    assert again.index(b"%%EOF") + len(b"%%EOF") == end
    assert first[:end] == again[:end]
    assert len(first) > end + 1000  # the signature's revision follows


# --- the key, and every way it can fail -----------------------------------------------------


def test_a_password_from_an_environment_variable_opens_the_key(
    key: KeyFiles, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BACC_AUDIT_TEST_KEY", key.password)
    opened = signing.load_key(SigningConfig(key.p12, None, "BACC_AUDIT_TEST_KEY"))
    assert (opened.subject, opened.cert_sha256) == (key.subject, key.cert_sha256)
    assert signing.cover(opened)["cert_sha256"] == key.cert_sha256


@pytest.mark.parametrize(
    ("case", "sentence"),
    [
        ("wrong password", "{p12}: the password from environment variable BACC_AUDIT_TEST_KEY "
         "does not open this PKCS#12 file"),
        ("unset variable", "[signing] password_env names BACC_AUDIT_TEST_KEY, which is not set "
         "here, so the signing key cannot be opened; set it where the job starts (e.g. its "
         "systemd unit's EnvironmentFile=)"),
        ("no key file", "{missing}: no such file ([signing] pkcs12, the signing key)"),
        ("not a PKCS#12", "{ca}: not a PKCS#12 file ([signing] pkcs12 takes a .p12 or .pfx "
         "holding the key and its certificate)"),
        ("no password file", "{missing}: no such file ([signing] password_file, the signing "
         "key's password)"),
    ],
)
def test_a_key_that_will_not_open_is_one_sentence(
    key: KeyFiles, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, case: str, sentence: str
) -> None:
    missing = tmp_path / "nothing-here"
    conf = SigningConfig(key.p12, None, "BACC_AUDIT_TEST_KEY")
    monkeypatch.setenv("BACC_AUDIT_TEST_KEY", key.password)
    if case == "wrong password":
        monkeypatch.setenv("BACC_AUDIT_TEST_KEY", "Correct horse battery staple")
    elif case == "unset variable":
        monkeypatch.delenv("BACC_AUDIT_TEST_KEY")
    elif case == "no key file":
        conf = SigningConfig(missing, None, "BACC_AUDIT_TEST_KEY")
    elif case == "not a PKCS#12":
        conf = SigningConfig(key.ca_pem, None, "BACC_AUDIT_TEST_KEY")
    else:
        conf = SigningConfig(key.p12, missing, None)
    with pytest.raises(UserError) as e:
        signing.load_key(conf)
    assert str(e.value) == sentence.format(p12=key.p12, missing=missing, ca=key.ca_pem)
    assert e.value.exit_code == 2


def test_an_expired_or_not_yet_valid_certificate_is_refused(tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch
                                                            ) -> None:
    monkeypatch.setenv("PW", "pw")
    old = make_key(tmp_path / "old", password="pw",
                   valid_from=dt.datetime(2026, 1, 1, tzinfo=dt.UTC), valid_days=30)
    with pytest.raises(UserError) as e:
        signing.load_key(SigningConfig(old.p12, None, "PW"),
                         now=dt.datetime(2026, 11, 29, tzinfo=dt.UTC))
    assert str(e.value) == (
        f"{old.p12}: the certificate of {old.subject} expired on 2026-01-31; renew it before "
        "reports are signed with it"
    )
    with pytest.raises(UserError) as e:
        signing.load_key(SigningConfig(old.p12, None, "PW"),
                         now=dt.datetime(2025, 12, 1, tzinfo=dt.UTC))
    assert str(e.value) == (
        f"{old.p12}: the certificate of {old.subject} is not valid before 2026-01-01 00:00 UTC"
    )


# --- [signing] in the property config -------------------------------------------------------


def _config(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "bacc-audit.toml"
    path.write_text(f'[property]\nname = "P"\n\n[signing]\n{body}\n')
    return path


def test_signing_paths_are_read_from_the_config_folder(tmp_path: Path) -> None:
    path = _config(tmp_path, 'pkcs12 = "keys/signer.p12"\npassword_file = "keys/pw"\n'
                   'trust_root = "/etc/bacc-audit/ca.pem"')
    conf = config.load(path)
    assert conf.signing == SigningConfig(
        tmp_path / "keys/signer.p12", tmp_path / "keys/pw", None, Path("/etc/bacc-audit/ca.pem")
    )
    assert config.load(_config(tmp_path, 'pkcs12 = "k.p12"\npassword_env = "KEY_PW"')).signing \
        == SigningConfig(tmp_path / "k.p12", None, "KEY_PW", None)


@pytest.mark.parametrize(
    ("body", "sentence"),
    [
        ('pkcs12 = "k.p12"\npassword = "hunter2"',
         "[signing] must not hold the password itself; put it in a file only the job's user "
         "can read (password_file) or in an environment variable (password_env)"),
        ('pkcs12 = "k.p12"\npassword_file = "pw"\npassword_env = "PW"',
         "[signing] needs exactly one of password_file (a file holding the PKCS#12 password) "
         "and password_env (the environment variable holding it)"),
        ('pkcs12 = "k.p12"',
         "[signing] needs exactly one of password_file (a file holding the PKCS#12 password) "
         "and password_env (the environment variable holding it)"),
        ('password_env = "PW"',
         "[signing] needs pkcs12, the PKCS#12 file (.p12 or .pfx) holding the signing key and "
         "its certificate"),
        ('pkcs_12 = "k.p12"\npassword_env = "PW"',
         "unknown key in [signing]: 'pkcs_12'; did you mean 'pkcs12'? (known here: pkcs12, "
         "password_file, password_env, trust_root)"),
        ('pkcs12 = 12\npassword_env = "PW"', "signing.pkcs12 must be a file path, not 12"),
    ],
)
def test_a_signing_section_that_cannot_be_right_is_refused(
    tmp_path: Path, body: str, sentence: str
) -> None:
    path = _config(tmp_path, body)
    with pytest.raises(UserError) as e:
        config.load(path)
    assert str(e.value) == f"{path}: {sentence}"


def test_the_example_configs_signing_section_loads_as_documented(tmp_path: Path) -> None:
    """docs/property.example.toml shows [signing] commented out; uncommented (one of its two
    password sources, as the loader asks), it is what the docs say."""
    example = (Path(__file__).resolve().parents[2] / "docs" / "property.example.toml")
    text = example.read_text()
    section = text[text.index("# [signing]"):]
    body = "\n".join(line[2:] for line in section.splitlines()
                     if line.startswith("# ") and "password_env" not in line)
    path = tmp_path / "example.toml"
    path.write_text(text[: text.index("# [signing]")] + body + "\n")
    assert config.load(path).signing == SigningConfig(
        Path("/etc/bacc-audit/signing.p12"), Path("/etc/bacc-audit/signing.pass"), None,
        Path("/etc/bacc-audit/ca.pem"),
    )
