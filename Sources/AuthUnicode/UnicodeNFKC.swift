// NFKC of passwords as Foundation computes it, without Foundation (standard library only).
//
// Derived from swift-corelibs-foundation's CoreFoundation (CFStringNormalize and
// CFUniChar*, Copyright (c) Apple Inc. and the Swift project authors), Apache License
// v2.0 with Runtime Library Exception (https://swift.org/LICENSE.txt): a port of its form KC,
// quirks included, because the stored password hashes were computed over
// `String.precomposedStringWithCompatibilityMapping`, i.e. over exactly its output.
// docs/identity.md ("Passwords") says why; Tests/AuthUnicodeTests/UnicodeNFKCTests.swift
// compares it with Foundation on every scalar and on random strings.
//
// Stored password hashes were computed over Foundation's
// `String.precomposedStringWithCompatibilityMapping`. On Linux that is
// swift-corelibs-foundation, i.e. CoreFoundation's
// `CFStringNormalize(_, kCFStringNormalizationFormKC)`, which is NOT a
// conforming UAX #15 NFKC: it works cluster by cluster on UTF-16 and, among
// other things,
//   * never composes across characters produced by different compatibility
//     decompositions ("ｶﾞ" -> "カ\u{3099}", not "ガ"; "ﾀ\u{1161}" stays apart),
//   * does not compose an LV syllable with a following trailing jamo
//     ("가\u{11A8}" stays two scalars),
//   * composes Hangul jamo with off-by-one / truncated index arithmetic
//     ("\u{1113}\u{1161}" -> U+D7A4, "\u{1113}\u{1165}" -> a lone surrogate,
//     read back as U+FFFD, U+1100 + U+11173 -> U+ADF8),
//   * matches the base of most compositions on its low 16 bits only
//     (U+11F00 + U+0300 -> U+1F02),
//   * uses CoreFoundation's own Unicode tables (Unicode 15 on this toolchain,
//     while the standard library's NFC uses Unicode 16).
// So the standard library's NFC cannot reproduce it; this file is a faithful
// port of CFStringNormalize (form KC) driven by tables generated from that
// very Foundation (CoreFoundationUnicodeTables.swift).

// MARK: - Tables

private func parseHex<S: Sequence>(_ field: S) -> UInt32 where S.Element == UInt8 {
    var value: UInt32 = 0
    for byte in field {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): value = value << 4 | UInt32(byte - UInt8(ascii: "0"))
        case UInt8(ascii: "A")...UInt8(ascii: "F"): value = value << 4 | UInt32(byte - UInt8(ascii: "A") + 10)
        default: preconditionFailure("malformed Unicode table")
        }
    }
    return value
}

private func parseDecimal(_ field: ArraySlice<UInt8>) -> Int {
    var value = 0
    for byte in field {
        precondition(byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9"), "malformed Unicode table")
        value = value * 10 + Int(byte - UInt8(ascii: "0"))
    }
    return value
}

/// Calls `body` with the space-separated fields of each line of `text`.
private func forEachLine(_ text: String, _ body: ([ArraySlice<UInt8>]) -> Void) {
    for line in Array(text.utf8).split(separator: UInt8(ascii: "\n")) {
        body(line.split(separator: UInt8(ascii: " ")))
    }
}

/// CoreFoundation's Unicode data, parsed once on first use (global `let`s are
/// initialised lazily and thread-safely).
struct CFUnicodeData: Sendable {
    /// Full compatibility decomposition of every member of CF's
    /// compatibility-decomposable set.
    var compatibility: [UInt32: [UInt32]] = [:]
    /// Full canonical decomposition of CF's canonical-decomposable scalars
    /// (Hangul syllables are algorithmic) with the minimum buffer size.
    var canonical: [UInt32: (minBuffer: Int, mapping: [UInt32])] = [:]
    var combiningClass: [UInt32: UInt8] = [:]
    var nonBase: Set<UInt32> = []
    /// (base << 32 | combining) -> composite
    var composition: [UInt64: UInt32] = [:]
    /// Combining characters whose precomposition base CF compares on its low
    /// 16 bits only.
    var sixteenBitBase: Set<UInt32> = []

    static let shared = CFUnicodeData()

    private init() {
        var canonical: [UInt32: (minBuffer: Int, mapping: [UInt32])] = [:]
        forEachLine(canonicalDecompositionData) { f in
            canonical[parseHex(f[0])] = (parseDecimal(f[1]), f.dropFirst(2).map(parseHex))
        }
        self.canonical = canonical
        forEachLine(compatibilityDecompositionData) { f in
            let scalar = parseHex(f[0])
            // Entries that are canonically decomposable are not in CF's
            // compatibility set (CF decomposes them canonically first).
            if canonical[scalar] == nil && !(0xAC00...0xD7A3).contains(scalar) {
                compatibility[scalar] = f.dropFirst().map(parseHex)
            }
        }
        forEachLine(combiningClassData) { f in
            let value = UInt8(parseDecimal(f[2]))
            for c in parseHex(f[0])...parseHex(f[1]) { combiningClass[c] = value }
        }
        forEachLine(nonBaseData) { f in
            for c in parseHex(f[0])...parseHex(f[1]) { nonBase.insert(c) }
        }
        forEachLine(compositionData) { f in
            composition[UInt64(parseHex(f[0])) << 32 | UInt64(parseHex(f[1]))] = parseHex(f[2])
        }
        forEachLine(sixteenBitBaseCombiningData) { f in
            for c in parseHex(f[0])...parseHex(f[1]) { sixteenBitBase.insert(c) }
        }
    }
}

// MARK: - Port of CFStringNormalize (kCFStringNormalizationFormKC)

private let hangulSBase: UInt32 = 0xAC00
private let hangulLBase: UInt32 = 0x1100
private let hangulVBase: UInt32 = 0x1161
private let hangulTBase: UInt32 = 0x11A7
private let hangulSCount: UInt32 = 11172
private let hangulLCount = 19
private let hangulVCount = 21
private let hangulTCount = 28
private let hangulNCount: UInt32 = 21 * 28
private let maxDecompBuf = 64

@inline(__always) private func isHighSurrogate(_ u: UInt32) -> Bool { u >= 0xD800 && u <= 0xDBFF }
@inline(__always) private func isLowSurrogate(_ u: UInt32) -> Bool { u >= 0xDC00 && u <= 0xDFFF }
@inline(__always) private func surrogatePair(_ high: UInt32, _ low: UInt32) -> UInt32 {
    ((high - 0xD800) << 10) + (low - 0xDC00) + 0x10000
}

/// Working state of one CFStringNormalize call: the mutable UTF-16 string and
/// the UTF-32 scratch buffer ("mappedCharacters").
private struct CFNormalizer {
    let data = CFUnicodeData.shared
    var string: [UInt16]
    var buffer = [UInt32](repeating: 0, count: maxDecompBuf + 1)  // +1: CF may touch one slot past the end
    var allocatedLength = maxDecompBuf

    init(_ string: [UInt16]) { self.string = string }

    @inline(__always) func ccc(_ c: UInt32) -> UInt8 { data.combiningClass[c] ?? 0 }
    @inline(__always) func isCanonicallyDecomposable(_ c: UInt32) -> Bool {
        (c >= hangulSBase && c < hangulSBase + hangulSCount) || data.canonical[c] != nil
    }
    @inline(__always) func isNonBase(_ c: UInt32) -> Bool { data.nonBase.contains(c) }
    @inline(__always) func isCompatibilityDecomposable(_ c: UInt32) -> Bool { data.compatibility[c] != nil }
    /// CFUniCharPrecomposeCharacter(base, combining); 0xFFFD if none.
    func precompose(_ base: UInt32, _ combining: UInt32) -> UInt32 {
        let key = data.sixteenBitBase.contains(combining) ? base & 0xFFFF : base
        return data.composition[UInt64(key) << 32 | UInt64(combining)] ?? 0xFFFD
    }

    mutating func grow() {
        allocatedLength += maxDecompBuf
        buffer.append(contentsOf: repeatElement(0, count: maxDecompBuf))
    }

    /// CFUniCharDecomposeCharacter(character, buffer + at, maxBufferLength)
    /// Appends `c` to `buffer` at `mappedLength`: its canonical decomposition, or itself.
    mutating func appendDecomposed(_ c: UInt32, mappedLength: inout Int) {
        if isCanonicallyDecomposable(c) {
            mappedLength += decomposeCharacter(c, at: mappedLength, maxBufferLength: maxDecompBuf - mappedLength)
        } else {
            buffer[mappedLength] = c
            mappedLength += 1
        }
    }

    mutating func decomposeCharacter(_ c: UInt32, at: Int, maxBufferLength: Int) -> Int {
        if c >= hangulSBase && c <= hangulSBase + hangulSCount {
            let s = c - hangulSBase
            let length = s % UInt32(hangulTCount) != 0 ? 3 : 2
            if maxBufferLength < length { return 0 }
            buffer[at] = s / hangulNCount + hangulLBase
            buffer[at + 1] = (s % hangulNCount) / UInt32(hangulTCount) + hangulVBase
            if length > 2 { buffer[at + 2] = s % UInt32(hangulTCount) + hangulTBase }
            return length
        }
        guard let entry = data.canonical[c], entry.minBuffer > 0, maxBufferLength >= entry.minBuffer else { return 0 }
        for (i, v) in entry.mapping.enumerated() { buffer[at + i] = v }
        return entry.mapping.count
    }

    /// __CFUniCharPrioritySort
    mutating func prioritySort(_ length: Int) {
        var start = 0
        while start < length && ccc(buffer[start]) == 0 { start += 1 }
        guard length - start > 1 else { return }
        var changes = true
        while changes {
            changes = false
            var p2 = ccc(buffer[start])
            for i in (start + 1)..<length {
                let p1 = p2
                p2 = ccc(buffer[i])
                if p1 > p2 {
                    buffer.swapAt(i - 1, i)
                    changes = true
                }
            }
        }
    }

    /// CFUniCharCompatibilityDecompose(buffer, length, maxBufferLength);
    /// returns 0 if the buffer is too small (after possibly modifying it).
    mutating func compatibilityDecompose(_ length: Int, _ maxBufferLength: Int) -> Int {
        var length = length
        var index = 0
        let limit = length  // CF does not move the limit as the buffer grows
        while index < limit {
            let c = buffer[index]
            if isCompatibilityDecomposable(c), let mapping = data.compatibility[c] {
                let filled = mapping.count
                if filled + length - 1 > maxBufferLength { return 0 }
                if filled > 1 {
                    // __CFUniCharMoveBufferFromEnd1(index + 1, limit - index - 1, filled - 1)
                    var i = limit - 1
                    while i > index {
                        buffer[i + filled - 1] = buffer[i]
                        i -= 1
                    }
                }
                length += filled - 1
                for v in mapping {
                    buffer[index] = v
                    index += 1
                }
            } else {
                index += 1
            }
        }
        return length
    }

    mutating func removeFromBuffer(at index: Int, mappedLength: Int) {
        // memmove(buffer + index, buffer + index + 1, mappedLength - index) with
        // mappedLength already decremented
        var i = index
        while i < mappedLength {
            buffer[i] = buffer[i + 1]
            i += 1
        }
    }

    mutating func readCharacter(at index: Int, limit: Int) -> UInt32 {
        let unit = UInt32(string[index])
        if isHighSurrogate(unit) && index + 1 < limit && isLowSurrogate(UInt32(string[index + 1])) {
            return surrogatePair(unit, UInt32(string[index + 1]))
        }
        return unit
    }

    mutating func run() {
        var currentIndex = 0
        var limit = string.count
        var contents = 0
        var mappedLength = 0
        var currentLength = 0
        var currentChar: UInt32 = 0

        while contents < limit {
            currentChar = readCharacter(at: contents, limit: limit)
            currentLength = currentChar > 0xFFFF ? 2 : 1
            contents += currentLength

            mappedLength = 0

            if isCanonicallyDecomposable(currentChar) && ccc(currentChar) == 0 {
                // Hangul syllables are not decomposed when composing again.
                if currentChar < hangulSBase || currentChar > hangulSBase + hangulSCount {
                    mappedLength = decomposeCharacter(currentChar, at: 0, maxBufferLength: maxDecompBuf)
                }
            }

            if contents < limit || mappedLength == 0 {
                if mappedLength > 0 {
                    currentChar = readCharacter(at: contents, limit: limit)
                }

                if ccc(currentChar) != 0 {
                    let width = currentChar & 0xFFFF_0000 != 0 ? 2 : 1
                    if mappedLength == 0 {
                        contents -= width
                        if currentIndex > 0 {
                            if isLowSurrogate(UInt32(string[contents - 1])) && currentIndex > 1
                                && isHighSurrogate(UInt32(string[contents - 2]))
                            {
                                buffer[0] = surrogatePair(UInt32(string[contents - 2]), UInt32(string[contents - 1]))
                                currentIndex -= 2
                                currentLength += 2
                            } else {
                                buffer[0] = UInt32(string[contents - 1])
                                currentIndex -= 1
                                currentLength += 1
                            }
                            mappedLength = 1
                        }
                    } else {
                        currentLength += width
                    }
                    contents += width

                    appendDecomposed(currentChar, mappedLength: &mappedLength)

                    while contents < limit {
                        currentChar = readCharacter(at: contents, limit: limit)
                        if ccc(currentChar) == 0 { break }
                        if currentChar & 0xFFFF_0000 != 0 {
                            contents += 2
                            currentLength += 2
                        } else {
                            contents += 1
                            currentLength += 1
                        }
                        if mappedLength == allocatedLength { grow() }
                        appendDecomposed(currentChar, mappedLength: &mappedLength)
                    }
                }
                if mappedLength > 1 { prioritySort(mappedLength) }
            }

            // Compatibility decomposition (form KD bit).
            do {
                var newLength = 0
                if mappedLength == 0 && isCompatibilityDecomposable(currentChar) {
                    buffer[0] = currentChar
                    mappedLength = 1
                }
                while newLength < mappedLength {
                    newLength = compatibilityDecompose(mappedLength, allocatedLength)
                    if newLength == 0 { grow() }
                }
                mappedLength = newLength
            }

            // Canonical composition (form C bit).
            if mappedLength > 1 {
                var consumedLength = 1
                var currentBase = 0
                var lastClass: UInt8 = 0
                var didCombine = false

                currentChar = buffer[0]

                while consumedLength < mappedLength {
                    var nextChar = buffer[consumedLength]
                    let currentClass = ccc(nextChar)

                    if currentChar >= hangulLBase && currentChar < hangulLBase + 0xFF {
                        let lIndex = Int8(truncatingIfNeeded: currentChar &- hangulLBase)
                        if lIndex >= 0 && Int(lIndex) <= hangulLCount {
                            let vIndex = Int16(truncatingIfNeeded: nextChar &- hangulVBase)
                            if vIndex >= 0 && Int(vIndex) <= hangulVCount {
                                var tIndex: Int16 = 0
                                var usedLength = mappedLength

                                buffer[consumedLength] = 0xFFFD
                                consumedLength += 1

                                if consumedLength < mappedLength {
                                    tIndex = Int16(truncatingIfNeeded: buffer[consumedLength] &- hangulTBase)
                                    if tIndex < 0 || Int(tIndex) > hangulTCount {
                                        tIndex = 0
                                    } else {
                                        buffer[consumedLength] = 0xFFFD
                                        consumedLength += 1
                                    }
                                }
                                buffer[currentBase] = UInt32(
                                    truncatingIfNeeded: (Int(lIndex) * hangulVCount + Int(vIndex)) * hangulTCount
                                        + Int(tIndex) + Int(hangulSBase)
                                )

                                usedLength -= 1
                                while usedLength > 0 {
                                    if buffer[usedLength] == 0xFFFD {
                                        mappedLength -= 1
                                        consumedLength -= 1
                                        removeFromBuffer(at: usedLength, mappedLength: mappedLength)
                                    }
                                    usedLength -= 1
                                }
                                currentBase = consumedLength
                                currentChar = buffer[currentBase]
                                consumedLength += 1
                                continue
                            }
                        }
                    }
                    if !isNonBase(nextChar) {
                        buffer[currentBase] = currentChar
                        currentBase = consumedLength
                        currentChar = nextChar
                        consumedLength += 1
                        continue
                    }

                    if lastClass == 0 || currentClass > lastClass {
                        nextChar = precompose(currentChar, nextChar)
                        if nextChar == 0xFFFD {
                            lastClass = currentClass
                        } else {
                            buffer[consumedLength] = 0xFFFD
                            didCombine = true
                            currentChar = nextChar
                        }
                    }
                    consumedLength += 1
                }

                buffer[currentBase] = currentChar
                if didCombine {
                    consumedLength = mappedLength - 1
                    while consumedLength > 0 {
                        if buffer[consumedLength] == 0xFFFD {
                            mappedLength -= 1
                            removeFromBuffer(at: consumedLength, mappedLength: mappedLength)
                        }
                        consumedLength -= 1
                    }
                }
            } else if currentChar >= hangulLBase && currentChar < hangulLBase + 0xFF {  // Hangul jamo
                let lIndex = Int8(truncatingIfNeeded: currentChar &- hangulLBase)
                if contents < limit && lIndex >= 0 && Int(lIndex) <= hangulLCount {
                    let vIndex = Int16(truncatingIfNeeded: Int(string[contents]) - Int(hangulVBase))
                    if vIndex >= 0 && Int(vIndex) <= hangulVCount {
                        var tIndex: Int16 = 0
                        contents += 1
                        currentLength += 1
                        if contents < limit {
                            tIndex = Int16(truncatingIfNeeded: Int(string[contents]) - Int(hangulTBase))
                            if tIndex < 0 || Int(tIndex) > hangulTCount {
                                tIndex = 0
                            } else {
                                contents += 1
                                currentLength += 1
                            }
                        }
                        buffer[0] = UInt32(
                            truncatingIfNeeded: (Int(lIndex) * hangulVCount + Int(vIndex)) * hangulTCount + Int(tIndex)
                                + Int(hangulSBase)
                        )
                        mappedLength = 1
                    }
                }
            } else {  // collect class 0 non-base characters
                while contents < limit {
                    var nextChar = UInt32(string[contents])
                    if isHighSurrogate(nextChar) && contents + 1 < limit && isLowSurrogate(UInt32(string[contents + 1]))
                    {
                        nextChar = surrogatePair(nextChar, UInt32(string[contents + 1]))
                    }
                    if !isNonBase(nextChar) || ccc(nextChar) != 0 { break }
                    currentChar = precompose(currentChar, nextChar)
                    if currentChar == 0xFFFD { break }
                    if nextChar < 0x10000 {
                        contents += 1
                        currentLength += 1
                    } else {
                        contents += 2
                        currentLength += 2
                    }
                    buffer[0] = currentChar
                    mappedLength = 1
                }
            }

            if mappedLength > 0 {
                var units: [UInt16] = []
                units.reserveCapacity(mappedLength * 2)
                for i in 0..<mappedLength {
                    let c = buffer[i]
                    if c > 0xFFFF {
                        let v = c - 0x10000
                        units.append(UInt16(truncatingIfNeeded: (v >> 10) + 0xD800))
                        units.append(UInt16(truncatingIfNeeded: (v & 0x3FF) + 0xDC00))
                    } else {
                        units.append(UInt16(truncatingIfNeeded: c))
                    }
                }
                string.replaceSubrange(currentIndex..<(currentIndex + currentLength), with: units)
                currentLength = units.count
                limit = string.count
                contents = currentIndex + units.count
            }
            currentIndex += currentLength
        }
    }
}

// MARK: - Public API

public enum UnicodeNFKC {
    /// Returns `text` normalised exactly as Foundation's
    /// `precomposedStringWithCompatibilityMapping` does on the toolchain the
    /// tables were generated with (scripts/codegen/nfkc/generate.sh).
    public static func normalize(_ text: String) -> String {
        // ASCII is left unchanged by CFStringNormalize.
        if text.utf8.allSatisfy({ $0 < 0x80 }) { return text }
        var normalizer = CFNormalizer(Array(text.utf16))
        normalizer.run()
        // Like the Foundation bridge, lone surrogates (which CF's Hangul
        // arithmetic can produce) read back as U+FFFD.
        return String(decoding: normalizer.string, as: UTF16.self)
    }
}
