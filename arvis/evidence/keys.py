"""Ed25519 signing keys for checkpoints, kept in a file the database never sees.

The private key is a PKCS#8 PEM file readable by its owner only: ``create`` writes
it with mode 0600 and refuses to overwrite, and ``SigningKey.load`` refuses a file
that its group or others may read. The key's bytes are never logged or shown; the
public key is a SubjectPublicKeyInfo PEM, and its id the SHA-256 of its raw bytes.
"""

from __future__ import annotations

import base64
import binascii
import os
import stat
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from arvis.domain.checkpoints import Checkpoint, public_key_id
from arvis.domain.errors import ConfigurationError


class SigningKeyError(ConfigurationError):
    """The signing or public key file is missing, unreadable, unsafe or not Ed25519."""

    code = "signing_key_invalid"


class PublicKey:
    """The key an auditor trusts: verifies checkpoint signatures."""

    def __init__(self, key: Ed25519PublicKey) -> None:
        self._key = key
        self.raw = key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        self.key_id = public_key_id(self.raw)

    @classmethod
    def from_pem(cls, pem: bytes, where: str = "public key") -> PublicKey:
        try:
            key = serialization.load_pem_public_key(pem)
        except ValueError:
            raise SigningKeyError(f"{where} is not a PEM public key") from None
        if not isinstance(key, Ed25519PublicKey):
            raise SigningKeyError(f"{where} is not an Ed25519 key")
        return cls(key)

    @classmethod
    def from_raw_b64(cls, text: str) -> PublicKey:
        try:
            raw = base64.b64decode(text, validate=True)
            return cls(Ed25519PublicKey.from_public_bytes(raw))
        except (ValueError, binascii.Error):
            raise SigningKeyError("the public key is not 32 bytes of base64") from None

    @classmethod
    def load(cls, path: Path) -> PublicKey:
        try:
            pem = path.read_bytes()
        except OSError as exc:
            raise SigningKeyError(f"cannot read the public key {path}: {exc.strerror}") from None
        return cls.from_pem(pem, f"the public key {path}")

    @property
    def pem(self) -> str:
        return self._key.public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        ).decode()

    @property
    def raw_b64(self) -> str:
        return base64.b64encode(self.raw).decode()

    def verifies(self, checkpoint: Checkpoint) -> bool:
        """True when ``checkpoint`` is signed by this key over its exact preimage."""
        try:
            signature = base64.b64decode(checkpoint.signature, validate=True)
            self._key.verify(signature, checkpoint.preimage)
        except (InvalidSignature, ValueError, binascii.Error):
            return False
        return True


class SigningKey:
    """The deployment's checkpoint signer (``ARVIS_SIGNING_KEY_FILE``)."""

    def __init__(self, key: Ed25519PrivateKey) -> None:
        self._key = key
        self.public = PublicKey(key.public_key())
        self.key_id = self.public.key_id

    def __repr__(self) -> str:  # never the key's bytes, whatever prints it
        return f"SigningKey(key_id={self.key_id[:16]}…)"

    @classmethod
    def load(cls, path: Path) -> SigningKey:
        """Read the key; refuse a file its group or others can read or write."""
        try:
            mode = path.stat().st_mode
        except OSError as exc:
            raise SigningKeyError(f"cannot read the signing key {path}: {exc.strerror}") from None
        if mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise SigningKeyError(
                f"the signing key {path} is readable by others (mode {stat.S_IMODE(mode):o});"
                " run `chmod 600` on it"
            )
        try:
            key = serialization.load_pem_private_key(path.read_bytes(), password=None)
        except OSError as exc:
            raise SigningKeyError(f"cannot read the signing key {path}: {exc.strerror}") from None
        except (ValueError, TypeError):
            raise SigningKeyError(f"the signing key {path} is not an unencrypted PEM key") from None
        if not isinstance(key, Ed25519PrivateKey):
            raise SigningKeyError(f"the signing key {path} is not an Ed25519 key")
        return cls(key)

    @classmethod
    def create(cls, path: Path) -> SigningKey:
        """Make a new key at ``path`` (mode 0600); refuse to overwrite anything."""
        key = Ed25519PrivateKey.generate()
        pem = key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        try:
            # O_EXCL: an existing key is never replaced, not even by a race.
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            raise SigningKeyError(f"{path} exists; a signing key is never overwritten") from None
        except OSError as exc:
            raise SigningKeyError(f"cannot create {path}: {exc.strerror}") from None
        with os.fdopen(fd, "wb") as out:
            out.write(pem)
            out.flush()
            os.fsync(out.fileno())
        return cls(key)

    def sign(self, data: bytes) -> str:
        """Base64 of the Ed25519 signature over ``data``."""
        return base64.b64encode(self._key.sign(data)).decode()

    def verifies(self, checkpoint: Checkpoint) -> bool:
        """True when ``checkpoint`` is signed by this key."""
        return self.public.verifies(checkpoint)
