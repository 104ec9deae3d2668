#!/usr/bin/env python3
"""Writes src/tokenizer/unicode_props_tables.cpp, the character classes and the lowercase mapping the
WordPiece (BERT) normalizer and pre-tokenizer need, from the Unicode Character Database (Debian's
unicode-data package: /usr/share/unicode), the same source as gen_unicode_nfc.py. The build never needs
the package: the generated file is checked in.

  python3 scripts/gen_unicode_props.py [/usr/share/unicode] > src/tokenizer/unicode_props_tables.cpp

Tables: ranges of code points by class (nonspacing mark Mn, punctuation P*, "other" C* - control,
format, private use, surrogate; unassigned code points are "other" too and are left out of the table),
the White_Space property (PropList.txt), and lowercase mappings: UnicodeData's simple mapping, replaced
by SpecialCasing's unconditional full mapping where there is one (U+0130 -> "i" U+0307), the per-code-point
mapping Rust's char::to_lowercase applies (no context-dependent final sigma). For grapheme clusters
(UAX #29, which Hugging Face's Precompiled normalizer works in): Grapheme_Cluster_Break ranges
(auxiliary/GraphemeBreakProperty.txt) and Extended_Pictographic (emoji/emoji-data.txt)."""
import os
import sys

ucd = sys.argv[1] if len(sys.argv) > 1 else "/usr/share/unicode"

CLASS = {"Mn": 1, "Pc": 2, "Pd": 2, "Ps": 2, "Pe": 2, "Pi": 2, "Pf": 2, "Po": 2, "Cc": 3, "Cf": 3, "Co": 3, "Cs": 3}

cls = {}
lower = {}
assigned = set()
first_of_range = None
with open(os.path.join(ucd, "UnicodeData.txt"), encoding="utf-8") as f:
    for line in f:
        fields = line.rstrip("\n").split(";")
        cp = int(fields[0], 16)
        cat = fields[2]
        if fields[1].endswith(", First>"):
            first_of_range = cp
            continue
        if fields[1].endswith(", Last>"):
            for c in range(first_of_range, cp + 1):
                assigned.add(c)
                if cat in CLASS:
                    cls[c] = CLASS[cat]
            continue
        assigned.add(cp)
        if cat in CLASS:
            cls[cp] = CLASS[cat]
        if fields[13]:
            lower[cp] = [int(fields[13], 16)]

with open(os.path.join(ucd, "SpecialCasing.txt"), encoding="utf-8") as f:
    for line in f:
        line = line.split("#")[0].strip()
        if not line:
            continue
        parts = [p.strip() for p in line.split(";")]
        if len(parts) > 4 and parts[4]:  # a condition (language or context): not applied per code point
            continue
        cp = int(parts[0], 16)
        low = [int(x, 16) for x in parts[1].split()]
        if low != [cp]:
            lower[cp] = low
        elif cp in lower:
            del lower[cp]

white = set()
with open(os.path.join(ucd, "PropList.txt"), encoding="utf-8") as f:
    for line in f:
        line = line.split("#")[0].strip()
        if not line:
            continue
        parts = [p.strip() for p in line.split(";")]
        if parts[1] != "White_Space":
            continue
        if ".." in parts[0]:
            lo, hi = parts[0].split("..")
            white.update(range(int(lo, 16), int(hi, 16) + 1))
        else:
            white.add(int(parts[0], 16))

GBP = {"CR": 1, "LF": 2, "Control": 3, "Extend": 4, "ZWJ": 5, "Regional_Indicator": 6, "Prepend": 7,
       "SpacingMark": 8, "L": 9, "V": 10, "T": 11, "LV": 12, "LVT": 13}


def property_ranges(path, wanted):
    out = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.split("#")[0].strip()
            if not line:
                continue
            parts = [p.strip() for p in line.split(";")]
            value = wanted(parts[1])
            if value is None:
                continue
            if ".." in parts[0]:
                lo, hi = parts[0].split("..")
                rng = range(int(lo, 16), int(hi, 16) + 1)
            else:
                rng = [int(parts[0], 16)]
            for cp in rng:
                out[cp] = value
    return out


gbp = property_ranges(os.path.join(ucd, "auxiliary", "GraphemeBreakProperty.txt"), lambda v: GBP.get(v))
pict = property_ranges(os.path.join(ucd, "emoji", "emoji-data.txt"), lambda v: 0 if v == "Extended_Pictographic" else None)

version = "?"
with open(os.path.join(ucd, "DerivedNormalizationProps.txt"), encoding="utf-8") as f:
    first = f.readline()
    if "-" in first:
        version = first.split("-")[1].split(".txt")[0]


def ranges_of(points, value_of):
    out = []
    for cp in sorted(points):
        v = value_of(cp)
        if out and out[-1][1] == cp - 1 and out[-1][2] == v:
            out[-1][1] = cp
        else:
            out.append([cp, cp, v])
    return out


class_ranges = ranges_of(cls.keys(), lambda c: cls[c])
# Unassigned code points (category Cn) count as "other" as well.
unassigned = []
prev = -1
for cp in sorted(assigned) + [0x110000]:
    if cp > prev + 1:
        unassigned.append([prev + 1, cp - 1, 3])
    prev = cp
class_ranges = sorted(class_ranges + unassigned)
merged = []
for r in class_ranges:
    if merged and merged[-1][1] == r[0] - 1 and merged[-1][2] == r[2]:
        merged[-1][1] = r[1]
    else:
        merged.append(r)
white_ranges = ranges_of(white, lambda c: 0)

out = sys.stdout
out.write("// Generated by scripts/gen_unicode_props.py from the Unicode Character Database %s; do not edit.\n" % version)
out.write('#include "tokenizer/unicode_props_tables.h"\n\nnamespace pagoda::tokenizer::unicode {\n\n')
out.write("const ClassRange kClassRanges[] = {\n")
for lo, hi, c in merged:
    out.write("    {0x%X, 0x%X, %d},\n" % (lo, hi, c))
out.write("};\nconst size_t kClassRangeCount = sizeof(kClassRanges) / sizeof(kClassRanges[0]);\n\n")
out.write("const CodeRange kWhiteSpace[] = {\n")
for lo, hi, _ in white_ranges:
    out.write("    {0x%X, 0x%X},\n" % (lo, hi))
out.write("};\nconst size_t kWhiteSpaceCount = sizeof(kWhiteSpace) / sizeof(kWhiteSpace[0]);\n\n")
out.write("const LowercaseMapping kLowercase[] = {\n")
for cp in sorted(lower):
    assert len(lower[cp]) <= 2, hex(cp)
    m = lower[cp] + [0, 0]
    out.write("    {0x%X, 0x%X, 0x%X},\n" % (cp, m[0], m[1]))
out.write("};\nconst size_t kLowercaseCount = sizeof(kLowercase) / sizeof(kLowercase[0]);\n\n")
out.write("const ClassRange kGraphemeBreak[] = {\n")
for lo, hi, v in ranges_of(gbp.keys(), lambda c: gbp[c]):
    out.write("    {0x%X, 0x%X, %d},\n" % (lo, hi, v))
out.write("};\nconst size_t kGraphemeBreakCount = sizeof(kGraphemeBreak) / sizeof(kGraphemeBreak[0]);\n\n")
out.write("const CodeRange kExtendedPictographic[] = {\n")
for lo, hi, _ in ranges_of(pict.keys(), lambda c: 0):
    out.write("    {0x%X, 0x%X},\n" % (lo, hi))
out.write("};\nconst size_t kExtendedPictographicCount = sizeof(kExtendedPictographic) / sizeof(kExtendedPictographic[0]);\n\n")
out.write("}  // namespace pagoda::tokenizer::unicode\n")
