"""Throwaway signing keys for the signature tests: a CA of the test's own, a signer's
certificate it issues, the PKCS#12 file the property config names, and a config that names
it (`[signing]`).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import NameOID

PASSWORD = "correct horse battery staple"


@dataclass(frozen=True)
class KeyFiles:
    p12: Path
    password: str
    ca_pem: Path  # the CA that issued it: the trust root
    subject: str  # the signer's subject, RFC 4514, as the cover names it
    cert_sha256: str


def _name(cn: str) -> x509.Name:
    return x509.Name([
        x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Harbor Point Casino"),
        x509.NameAttribute(NameOID.COMMON_NAME, cn),
    ])


def _usage(ca: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=not ca, content_commitment=not ca, key_encipherment=False,
        data_encipherment=False, key_agreement=False, key_cert_sign=ca, crl_sign=ca,
        encipher_only=False, decipher_only=False,
    )


def make_key(
    folder: Path,
    *,
    cn: str = "Compliance Officer",
    ca_cn: str = "Harbor Point Test CA",
    password: str = PASSWORD,
    valid_from: dt.datetime | None = None,
    valid_days: float = 30,
) -> KeyFiles:
    """A CA and a signer's certificate it issued, valid from `valid_from` (default: a day
    ago) for `valid_days`; writes FOLDER/signer.p12 (the key, its certificate and the CA's,
    under `password`) and FOLDER/ca.pem."""
    folder.mkdir(parents=True, exist_ok=True)
    start = valid_from or dt.datetime.now(dt.UTC) - dt.timedelta(days=1)
    end = start + dt.timedelta(days=valid_days)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (
        x509.CertificateBuilder()
        .subject_name(_name(ca_cn)).issuer_name(_name(ca_cn))
        .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(start - dt.timedelta(days=1))
        .not_valid_after(end + dt.timedelta(days=365))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(_usage(ca=True), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(cn)).issuer_name(ca.subject)
        .public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(start).not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_usage(ca=False), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    p12 = folder / "signer.p12"
    p12.write_bytes(pkcs12.serialize_key_and_certificates(
        b"signer", key, cert, [ca], serialization.BestAvailableEncryption(password.encode())
    ))
    ca_pem = folder / "ca.pem"
    ca_pem.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    return KeyFiles(p12, password, ca_pem, cert.subject.rfc4514_string(),
                   cert.fingerprint(hashes.SHA256()).hex())


def signing_config(
    path: Path,
    key: KeyFiles,
    *,
    base: Path | None = None,
    password_env: str | None = None,
    trust_root: bool = True,
) -> Path:
    """A property config at `path`: `base`'s text (the sample's, say) and a [signing]
    section naming `key`, its password in a file beside the config (or, with
    `password_env`, in that environment variable)."""
    lines = [base.read_text() if base else "", "", "[signing]", f'pkcs12 = "{key.p12}"']
    if password_env:
        lines.append(f'password_env = "{password_env}"')
    else:
        secret = path.parent / "signing-password"
        secret.write_text(key.password + "\n")
        lines.append(f'password_file = "{secret.name}"')  # relative: to the config's folder
    if trust_root:
        lines.append(f'trust_root = "{key.ca_pem}"')
    path.write_text("\n".join(lines) + "\n")
    return path
