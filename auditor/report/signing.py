"""Signed PDFs (docs/signing.md): every filed report, and `report --out X.pdf`, signed PAdES-B-B
with the property's key once rendered, so that a PDF reader (or `verify --against`) shows
whether the file is still the one the tool filed; and the check of such a signature.

The key is a PKCS#12 file named in the config's `[signing]` (auditor/config.py); its
password comes from a file or an environment variable, never the config. PAdES-B-B is the
baseline profile: a CAdES signature over the whole file with the signer's certificate, and
no timestamp, so its signing time is the signer's own claim; a signature is checked as of
that time. The signature makes the bytes of a PDF differ from one signing to the next (its
time); whether a report changed is therefore judged on its content (jobs/archive.py), never
on the signed bytes.
"""

from __future__ import annotations

import datetime as dt
import io
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from auditor.config import PropertyConfig, SigningConfig
from auditor.errors import UserError

# The signature field every filed PDF carries, and what its signature says it is for.
FIELD = "bacc-audit"
REASON = "Compliance audit report as filed by bacc-audit"
PADES_SUBFILTER = "/ETSI.CAdES.detached"
# doctor warns when the certificate runs out within this many days.
EXPIRY_WARNING_DAYS = 30


@dataclass(frozen=True)
class SigningKey:
    """The key the PDFs are signed with, opened, and what the cover says of its certificate."""

    signer: Any  # pyhanko's SimpleSigner
    subject: str
    issuer: str
    cert_sha256: str
    not_before: dt.datetime
    not_after: dt.datetime
    source: Path


def _quiet() -> None:
    """pyHanko logs a failed path or digest with a traceback on stderr; the outcome is in the
    status it returns, which is what the commands say."""
    for name in ("pyhanko", "pyhanko_certvalidator"):
        logger = logging.getLogger(name)
        if not any(isinstance(h, logging.NullHandler) for h in logger.handlers):
            logger.addHandler(logging.NullHandler())


def _password(conf: SigningConfig) -> tuple[bytes, str]:
    """The PKCS#12 password and where it came from (for the sentences)."""
    if conf.password_env:
        value = os.environ.get(conf.password_env)
        if value is None:
            raise UserError(
                f"[signing] password_env names {conf.password_env}, which is not set here, so "
                "the signing key cannot be opened; set it where the job starts (e.g. its "
                "systemd unit's EnvironmentFile=)"
            )
        return value.encode(), f"environment variable {conf.password_env}"
    path = conf.password_file
    assert path is not None  # config.py asks for one of the two
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise UserError(
            f"{path}: no such file ([signing] password_file, the signing key's password)"
        ) from None
    except OSError as e:
        raise UserError(
            f"{path}: cannot read the signing key's password ({e.strerror}); let the job's "
            "user read it, and no one else"
        ) from None
    # One final newline is the editor's, not the password's.
    for end in (b"\r\n", b"\n"):
        if data.endswith(end):
            data = data[: -len(end)]
            break
    return data, str(path)


def load_key(conf: SigningConfig, now: dt.datetime | None = None) -> SigningKey:
    """Open the PKCS#12 file with its password; every problem is a one-sentence UserError
    (exit 2): a PDF is never filed unsigned because the configured key would not open."""
    from asn1crypto import pkcs12 as asn1_pkcs12
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.serialization import pkcs12
    from pyhanko.sign import signers

    path = conf.pkcs12
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise UserError(f"{path}: no such file ([signing] pkcs12, the signing key)") from None
    except OSError as e:
        raise UserError(f"{path}: cannot read the signing key ({e.strerror})") from None
    password, where = _password(conf)
    try:
        key, cert, extra = pkcs12.load_key_and_certificates(data, password)
    except ValueError:
        try:  # a PKCS#12 structure, so the password is what failed
            is_pkcs12 = bool(
                asn1_pkcs12.Pfx.load(data, strict=True)["auth_safe"]["content_type"].native
            )
        except Exception:  # asn1crypto raises several kinds for bytes of something else
            is_pkcs12 = False
        if is_pkcs12:
            raise UserError(
                f"{path}: the password from {where} does not open this PKCS#12 file"
            ) from None
        raise UserError(
            f"{path}: not a PKCS#12 file ([signing] pkcs12 takes a .p12 or .pfx holding the "
            "key and its certificate)"
        ) from None
    if key is None or cert is None:
        missing = "private key" if key is None else "certificate"
        raise UserError(f"{path}: the PKCS#12 file holds no {missing}; it needs both")
    now = now or dt.datetime.now(dt.UTC)
    subject = cert.subject.rfc4514_string()
    if now > cert.not_valid_after_utc:
        raise UserError(
            f"{path}: the certificate of {subject} expired on "
            f"{cert.not_valid_after_utc:%Y-%m-%d}; renew it before reports are signed with it"
        )
    if now < cert.not_valid_before_utc:
        raise UserError(
            f"{path}: the certificate of {subject} is not valid before "
            f"{cert.not_valid_before_utc:%Y-%m-%d %H:%M} UTC"
        )
    try:
        signer = signers.SimpleSigner.load_pkcs12_data(data, other_certs=[], passphrase=password)
    except ValueError as e:  # a key type pyHanko cannot sign with
        raise UserError(f"{path}: pyHanko cannot sign with this key ({e})") from None
    del extra  # the chain goes into every signature through the signer's registry
    return SigningKey(
        signer=signer,
        subject=subject,
        issuer=cert.issuer.rfc4514_string(),
        cert_sha256=cert.fingerprint(hashes.SHA256()).hex(),
        not_before=cert.not_valid_before_utc,
        not_after=cert.not_valid_after_utc,
        source=path,
    )


def key_for(conf: PropertyConfig) -> SigningKey | None:
    """The property's signing key, opened; None when the config has no [signing]."""
    return load_key(conf.signing) if conf.signing else None


def cover(key: SigningKey | None) -> dict[str, Any]:
    """What the report's cover says of its signature (the context key `signature`)."""
    if key is None:
        return {"signed": False}
    return {
        "signed": True,
        "subject": key.subject,
        "issuer": key.issuer,
        "cert_sha256": key.cert_sha256,
        "not_after": key.not_after,
    }


def sign(data: bytes, key: SigningKey, location: str = "") -> bytes:
    """The PDF signed PAdES-B-B (an incremental update: the rendered bytes stay as they were,
    the signature covers them all)."""
    from pyhanko.pdf_utils.incremental_writer import IncrementalPdfFileWriter
    from pyhanko.sign import fields, signers

    _quiet()
    meta = signers.PdfSignatureMetadata(
        field_name=FIELD,
        md_algorithm="sha256",
        subfilter=fields.SigSeedSubFilter.PADES,
        reason=REASON,
        location=location or None,
    )
    writer = IncrementalPdfFileWriter(io.BytesIO(data))
    out = signers.sign_pdf(writer, meta, signer=key.signer)
    return out.getvalue()


# --- checking a signature -------------------------------------------------------------------


@dataclass(frozen=True)
class SignatureCheck:
    """One signature of a PDF, as pyHanko judged it."""

    field: str
    signer: str  # the certificate's subject
    cert_sha256: str
    signed_at: dt.datetime | None  # the signer's own claim (B-B has no timestamp)
    intact: bool  # the bytes it covers are those signed (their digest matches)
    valid: bool  # the signature over that digest verifies with the certificate it carries
    trusted: bool | None  # the certificate chains to the trust root; None: none was given
    whole_file: bool  # it covers every byte of the file: nothing was appended after it
    modified_after: str  # pyHanko's modification level after it: none, form_filling, ...
    pades: bool  # PAdES (ETSI.CAdES.detached), as bacc-audit signs

    def problem(self) -> str:
        """What is wrong with it, as the end of a sentence; "" when it holds."""
        if not self.intact:
            return "the bytes it signed were changed after signing (their digest no longer matches)"
        if not self.valid:
            return "the signature does not verify with the certificate it carries"
        if self.trusted is False:
            return f"its certificate ({self.signer}) does not chain to the trust root"
        if self.modified_after not in ("none", "lta_updates", "form_filling"):
            return f"the file was changed after it was signed ({self.modified_after})"
        return ""

    def as_dict(self) -> dict[str, Any]:
        return {
            "field": self.field,
            "signer": self.signer,
            "cert_sha256": self.cert_sha256,
            "signed_at": self.signed_at.isoformat() if self.signed_at else None,
            "intact": self.intact,
            "valid": self.valid,
            "trusted": self.trusted,
            "whole_file": self.whole_file,
            "modified_after": self.modified_after,
            "pades": self.pades,
        }


@dataclass(frozen=True)
class SignatureStatus:
    """A PDF's signatures checked: `ok` when it is signed, every signature holds, and the
    last one covers the whole file. `problem` is the sentence when it is not."""

    pdf: str
    signatures: tuple[SignatureCheck, ...]
    problem: str  # "" when ok
    trust_root: str | None = None

    @property
    def signed(self) -> bool:
        return bool(self.signatures)

    @property
    def ok(self) -> bool:
        return self.signed and not self.problem

    def sentence(self) -> str:
        if self.problem:
            return f"{self.pdf}: {self.problem}"
        last = self.signatures[-1]
        trust = (
            f", trusted through {self.trust_root}" if last.trusted
            else " (no trust root given: checked against the certificate it carries)"
        )
        return f"{self.pdf}: signature of {last.signer} holds{trust}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "pdf": self.pdf,
            "signed": self.signed,
            "ok": self.ok,
            "problem": self.problem,
            "trust_root": self.trust_root,
            "signatures": [s.as_dict() for s in self.signatures],
        }


def signature_status(pdf: Path | bytes, trust_root: Path | None = None) -> SignatureStatus:
    """Check every signature of a PDF with pyHanko: the digest and signature against the
    certificate the PDF carries, and the certificate against `trust_root` (PEM or DER
    certificates) when one is given, as of the signer's own signing time. Never raises for
    a bad PDF: what is wrong is the status's `problem`."""
    from pyhanko.keys import load_certs_from_pemder
    from pyhanko.pdf_utils.reader import PdfFileReader

    _quiet()
    name = "the PDF" if isinstance(pdf, bytes) else str(pdf)
    root_name = str(trust_root) if trust_root else None

    def fail(problem: str) -> SignatureStatus:
        return SignatureStatus(name, (), problem, root_name)

    try:
        data = pdf if isinstance(pdf, bytes) else Path(pdf).read_bytes()
    except OSError as e:
        return fail(f"cannot be read ({e.strerror})")
    roots: list[Any] = []
    if trust_root is not None:
        try:
            roots = list(load_certs_from_pemder([str(trust_root)]))
        except (OSError, ValueError) as e:
            raise UserError(
                f"{trust_root}: cannot read the trust root's certificates ({e})"
            ) from None
    try:
        embedded = PdfFileReader(io.BytesIO(data), strict=False).embedded_signatures
    except Exception as e:  # pyHanko's reader raises several kinds for a broken file
        return fail(f"not a PDF pyHanko can read ({type(e).__name__}: {e})")
    if not embedded:
        return fail("carries no digital signature")
    checks = []
    for sig in embedded:
        try:
            checks.append(_check(sig, roots))
        except Exception as e:  # a damaged signature dictionary or CMS blob
            return SignatureStatus(
                name, tuple(checks),
                f"signature {sig.field_name!r} cannot be checked ({type(e).__name__}: {e})",
                root_name,
            )
    problem = next(
        (f"signature {c.field!r}: {p}" for c in checks if (p := c.problem())), ""
    )
    if not problem and not checks[-1].whole_file:
        problem = (
            f"bytes were appended after signature {checks[-1].field!r}: the file is no "
            "longer the one signed"
        )
    return SignatureStatus(name, tuple(checks), problem, root_name)


def _check(sig: Any, roots: list[Any]) -> SignatureCheck:
    from pyhanko.sign.validation import validate_pdf_signature
    from pyhanko.sign.validation.status import SignatureCoverageLevel
    from pyhanko_certvalidator import ValidationContext

    when = sig.self_reported_timestamp
    context = ValidationContext(trust_roots=roots, allow_fetching=False, moment=when)
    status = validate_pdf_signature(sig, context)
    from cryptography import x509

    level = status.modification_level
    cert = x509.load_der_x509_certificate(status.signing_cert.dump())
    return SignatureCheck(
        field=sig.field_name,
        signer=cert.subject.rfc4514_string(),  # as the cover names it (`cover`)
        cert_sha256=status.signing_cert.sha256.hex(),
        signed_at=when,
        intact=bool(status.intact),
        valid=bool(status.valid),
        trusted=bool(status.trusted) if roots else None,
        whole_file=status.coverage == SignatureCoverageLevel.ENTIRE_FILE,
        modified_after=level.name.lower() if level is not None else "unknown",
        pades=str(sig.sig_object.get("/SubFilter")) == PADES_SUBFILTER,
    )


# --- doctor ---------------------------------------------------------------------------------

# (passed, what was checked, what to do when it failed), as cli/doctor.py's checks.
Check = tuple[bool | None, str, str]


def doctor_checks(conf: PropertyConfig | None, now: dt.datetime | None = None) -> Iterator[Check]:
    """The signing key as the nightly job will use it: it opens with its password, its
    certificate is valid now, and a PDF signed with it validates (against the trust root,
    when one is configured)."""
    if conf is None:
        yield None, "signing key: not checked (the property config did not load)", ""
        return
    if conf.signing is None:
        yield (
            None,
            "signing key: none configured ([signing]); filed PDFs are unsigned and their "
            "covers say so",
            "",
        )
        return
    advice = (
        "fix [signing] in the property config (docs/signing.md): pkcs12, and the password's "
        "password_file or password_env"
    )
    try:
        key = load_key(conf.signing, now)
    except UserError as e:
        yield False, f"signing key: {e}", advice
        return
    import weasyprint

    status = signature_status(
        sign(weasyprint.HTML(string="<p>bacc-audit doctor</p>").write_pdf(), key),
        conf.signing.trust_root,
    )
    if not status.ok:
        yield (
            False,
            f"signing key {key.source}: a PDF signed with it does not validate: "
            f"{status.problem}",
            "use a key whose certificate chains to [signing] trust_root, or correct the trust "
            "root",
        )
        return
    days = ((now or dt.datetime.now(dt.UTC)) - key.not_after).days * -1
    trust = f", chains to {conf.signing.trust_root}" if conf.signing.trust_root else ""
    yield (
        True,
        f"signing key {key.source}: opens, certificate of {key.subject} valid until "
        f"{key.not_after:%Y-%m-%d} ({days} days){trust}; a PDF signed with it validates",
        "",
    )
    if days < EXPIRY_WARNING_DAYS:
        yield None, f"signing key: its certificate expires in {days} days; renew it", ""
