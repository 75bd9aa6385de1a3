"""Small real files the tests upload: WAV audio, VMD motion, PNG images."""

import struct
import zlib


def wav(seconds=1.0, rate=22050, seed=1):
    """A valid 16-bit mono PCM WAV (a quiet saw wave; seed makes the bytes unique)."""
    n = int(seconds * rate)
    frames = bytearray()
    for i in range(n):
        frames += struct.pack("<h", ((i * (seed + 3)) % 2000) - 1000)
    data = bytes(frames)
    fmt = struct.pack("<HHIIHH", 1, 1, rate, rate * 2, 2, 16)
    body = b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt + b"data" + struct.pack("<I", len(data)) + data
    return b"RIFF" + struct.pack("<I", len(body)) + body


def vmd(model="Miku", seed=0):
    """A VMD motion file with no key frames."""
    head = b"Vocaloid Motion Data 0002".ljust(30, b"\0")
    name = model.encode("shift_jis").ljust(20, b"\0")
    # bone, morph, camera, light, shadow counts (the seed makes the bytes unique)
    return head + name + struct.pack("<IIIII", 0, 0, 0, 0, 0) + bytes([seed])


def png(w=8, h=8, rgba=(255, 120, 80, 255)):
    """A real RGBA PNG of one colour."""
    raw = b"".join(b"\0" + bytes(rgba) * w for _ in range(h))

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 6, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
