#!/usr/bin/env python3
"""Writes tests/data/exp_tanh_reference.txt: inputs and the correctly rounded
values of exp and tanh at them, from 50-digit decimal arithmetic.

    python3 crates/gradlift-lang/tools/reference.py > crates/gradlift-lang/tests/data/exp_tanh_reference.txt

Each line is `exp|tanh x y`, x and y the bits of the doubles in hex.
"""
import random
import struct
from decimal import Decimal, getcontext

getcontext().prec = 50


def bits(x: float) -> str:
    return f"{struct.unpack('<Q', struct.pack('<d', x))[0]:016x}"


rng = random.Random(20261201)
xs = []
for _ in range(1500):
    xs.append(rng.uniform(-745.0, 709.7))
for _ in range(1500):
    xs.append(rng.uniform(-3.0, 3.0))
for _ in range(500):
    xs.append(rng.uniform(-1e-3, 1e-3))
for _ in range(500):
    xs.append(rng.uniform(-23.0, 23.0))
# Just below powers of two, where gradlift's tanh errs most (three units).
xs += [float.fromhex(h) for h in ("0x1.ff9189dd90771p-9", "0x1.fe8b04869a8d0p-9", "0x1.ffe423584449fp-10")]
for x in xs:
    d = Decimal(x)
    if -708.0 < x < 709.7:
        print("exp", bits(x), bits(float(d.exp())))
    if -23.0 < x < 23.0:
        e = (2 * d).exp()
        print("tanh", bits(x), bits(float((e - 1) / (e + 1))))
