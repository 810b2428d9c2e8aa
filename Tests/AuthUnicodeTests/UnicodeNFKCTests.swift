import Foundation
import Testing

@testable import AuthUnicode

/// SplitMix64 with a fixed seed, so the random tests are deterministic.
private struct SplitMix64: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// Compares UnicodeNFKC.normalize with Foundation on every input; returns the
/// descriptions of the mismatches.
private func mismatches<S: Sequence>(_ inputs: S) -> [String] where S.Element == String {
    var result: [String] = []
    for s in inputs {
        let expected = s.precomposedStringWithCompatibilityMapping
        let actual = UnicodeNFKC.normalize(s)
        if !actual.unicodeScalars.elementsEqual(expected.unicodeScalars) {
            result.append("[\(hexScalars(s))]: got [\(hexScalars(actual))] expected [\(hexScalars(expected))]")
        }
    }
    return result
}

/// Scalars that take part in CoreFoundation's normalisation one way or another.
private let interestingScalars: [Unicode.Scalar] = {
    let data = CFUnicodeData.shared
    var set = Set<UInt32>(data.compatibility.keys)
    set.formUnion(data.canonical.keys)
    set.formUnion(data.combiningClass.keys)
    set.formUnion(data.nonBase)
    for (key, composite) in data.composition {
        set.insert(UInt32(key >> 32))
        set.insert(composite)
    }
    for r: ClosedRange<UInt32> in [
        0x1100...0x11FF, 0x3130...0x318F, 0xA960...0xA97F, 0xD7B0...0xD7FF,
        0xFFA0...0xFFDC, 0x3099...0x309C, 0xFFFD...0xFFFD, 0x41...0x5A,
        0x1_1161...0x1_1176, 0x1_11A7...0x1_11C3, 0x2_1161...0x2_1176,
    ] {
        set.formUnion(r)
    }
    for v in stride(from: UInt32(0xAC00), through: 0xD7A3, by: 97) { set.insert(v) }
    for v in [0xAC00, 0xAC01, 0xAE4C, 0xD7A3] as [UInt32] { set.insert(v) }
    return set.sorted().compactMap(Unicode.Scalar.init)
}()

private func hexScalars(_ s: String) -> String {
    s.unicodeScalars.map { String($0.value, radix: 16, uppercase: true) }.joined(separator: " ")
}

@Suite struct NFKCTests {
    @Test func everyScalarMatchesFoundation() {
        var mismatches: [String] = []
        var checked = 0
        for v in UInt32(0)...0x10FFFF {
            guard let scalar = Unicode.Scalar(v) else { continue }  // surrogates
            let s = String(Character(scalar))
            let expected = s.precomposedStringWithCompatibilityMapping
            let actual = UnicodeNFKC.normalize(s)
            checked += 1
            if !actual.unicodeScalars.elementsEqual(expected.unicodeScalars) {
                mismatches.append("\(hexScalars(s)): got [\(hexScalars(actual))] expected [\(hexScalars(expected))]")
            }
        }
        #expect(checked == 0x110000 - 0x800)
        #expect(
            mismatches.isEmpty,
            "\(mismatches.count) mismatches:\n\(mismatches.prefix(200).joined(separator: "\n"))"
        )
    }

    @Test func randomStringsMatchFoundation() {
        let ranges: [ClosedRange<UInt32>] = [
            0x20...0x7E,  // ASCII
            0xC0...0x17F,  // Latin-1 / Latin Extended-A
            0x300...0x36F,  // combining diacritical marks
            0x300...0x36F,  // (weighted twice)
            0x1100...0x11FF,  // Hangul jamo
            0xAC00...0xD7A3,  // Hangul syllables
            0xFB00...0xFB06,  // Latin ligatures
            0xFF01...0xFF5E,  // fullwidth ASCII
            0xFF61...0xFFDC,  // halfwidth katakana / Hangul
            0x2460...0x24FF,  // enclosed alphanumerics
            0x2070...0x209C,  // superscripts / subscripts
            0x00B2...0x00B9,  // Latin-1 superscripts etc.
            0xFB50...0xFDFF,  // Arabic presentation forms A
            0xFE70...0xFEFC,  // Arabic presentation forms B
            0xF900...0xFAFF,  // CJK compatibility ideographs
            0x3099...0x309C,  // kana voiced marks
            0x3040...0x30FF,  // hiragana / katakana
            0x212B...0x212B,  // ANGSTROM SIGN
        ]
        var rng = SplitMix64(state: 0x5EED_CAFE_F00D_1234)
        let count = 5000
        let inputs = (0..<count).map { _ in
            let length = Int.random(in: 1...12, using: &rng)
            var scalars = String.UnicodeScalarView()
            while scalars.count < length {
                let r = ranges.randomElement(using: &rng)!
                if let s = Unicode.Scalar(UInt32.random(in: r, using: &rng)) { scalars.append(s) }
            }
            return String(scalars)
        }
        let bad = mismatches(inputs)
        #expect(bad.isEmpty, "\(bad.count) of \(count) mismatches:\n\(bad.prefix(100).joined(separator: "\n"))")
    }

    /// `input` normalises to `expected`, here and in Foundation.
    private func expectNormalizes(_ input: String, to expected: String) {
        let actual = UnicodeNFKC.normalize(input)
        #expect(
            actual.unicodeScalars.elementsEqual(expected.unicodeScalars),
            "\(hexScalars(input)) -> [\(hexScalars(actual))], expected [\(hexScalars(expected))]"
        )
        #expect(input.precomposedStringWithCompatibilityMapping.unicodeScalars.elementsEqual(expected.unicodeScalars))
    }

    @Test(arguments: [
        ("\u{FB01}", "fi"),
        ("\u{2460}", "1"),
        ("\u{212B}", "\u{00C5}"),
        ("e\u{301}", "\u{E9}"),
        ("\u{FF21}", "A"),
        ("\u{FF76}", "\u{30AB}"),
        ("Pa\u{FB01}\u{FF53}\u{2460}", "Pafis1"),
        ("", ""),
        ("plain ASCII", "plain ASCII"),
    ])
    func namedExamples(input: String, expected: String) {
        expectNormalizes(input, to: expected)
    }

    /// Random strings over every scalar CoreFoundation's normaliser treats
    /// specially (decomposable, combining, non-base, composable, jamo).
    @Test func randomInterestingStringsMatchFoundation() {
        var rng = SplitMix64(state: 0x0DDB_A11C_0FFE_E000)
        let count = 30_000
        let inputs = (0..<count).map { _ in
            String(
                String.UnicodeScalarView(
                    (0..<Int.random(in: 1...12, using: &rng)).map { _ in
                        interestingScalars.randomElement(using: &rng)!
                    }
                )
            )
        }
        let bad = mismatches(inputs)
        #expect(bad.isEmpty, "\(bad.count) of \(count) mismatches:\n\(bad.prefix(100).joined(separator: "\n"))")
    }

    /// Every interesting scalar followed by each of a few combining / jamo
    /// characters: exercises every composition pair and the Hangul paths.
    @Test func interestingPairsMatchFoundation() {
        let seconds: [Unicode.Scalar] = [
            "\u{300}", "\u{301}", "\u{308}", "\u{327}", "\u{334}", "\u{345}",
            "\u{3099}", "\u{309A}", "\u{FF9E}", "\u{1161}", "\u{11A8}",
            "\u{11173}", "\u{093C}", "\u{0B3E}", "\u{0CD5}", "\u{11127}",
        ]
        let inputs = interestingScalars.lazy.flatMap { first in
            seconds.lazy.map { String(String.UnicodeScalarView([first, $0])) }
        }
        let bad = mismatches(inputs)
        #expect(bad.isEmpty, "\(bad.count) mismatches:\n\(bad.prefix(100).joined(separator: "\n"))")
    }

    /// Long runs of combining marks overflow CoreFoundation's 64-entry buffer.
    @Test func longCombiningRunsMatchFoundation() {
        var rng = SplitMix64(state: 0x1234_5678_9ABC_DEF0)
        let marks = interestingScalars.filter { (CFUnicodeData.shared.combiningClass[$0.value] ?? 0) != 0 }
        let bases: [Unicode.Scalar] = [
            "a", "\u{1D5}", "\u{1E69}", "\u{FB01}", "\u{1FC1}", "\u{AC00}", "\u{1100}", "\u{2126}",
        ]
        var inputs: [String] = []
        for n in [1, 2, 30, 60, 61, 62, 63, 64, 65, 66, 70, 127, 128, 129, 200] {
            for base in bases {
                for _ in 0..<4 {
                    var scalars = String.UnicodeScalarView([base])
                    for _ in 0..<n {
                        scalars.append(
                            Int.random(in: 0..<4, using: &rng) == 0
                                ? ["\u{344}", "\u{340}", "\u{301}", "\u{316}"].randomElement(using: &rng)!
                                : marks.randomElement(using: &rng)!
                        )
                    }
                    if Bool.random(using: &rng) { scalars.append("\u{FB01}") }
                    inputs.append(String(scalars))
                }
            }
        }
        let bad = mismatches(inputs)
        #expect(bad.isEmpty, "\(bad.count) mismatches:\n\(bad.prefix(20).joined(separator: "\n"))")
    }

    /// Where CoreFoundation's KC differs from UAX #15 NFKC (and from the
    /// standard library's NFC), we follow CoreFoundation.
    @Test(arguments: [
        ("\u{FF76}\u{FF9E}", "\u{30AB}\u{3099}"),  // halfwidth ｶﾞ: not composed to ガ
        ("\u{FFA1}\u{1161}", "\u{1100}\u{1161}"),  // halfwidth jamo: no Hangul composition
        ("\u{AC00}\u{11A8}", "\u{AC00}\u{11A8}"),  // LV + T not composed
        ("\u{1100}\u{1161}\u{11A8}", "\u{AC01}"),  // L + V + T composed
        ("\u{1113}\u{1161}", "\u{D7A4}"),  // jamo index off by one
        ("\u{1113}\u{1165}", "\u{FFFD}"),  // ... even into a lone surrogate
        ("\u{3131}\u{11173}", "\u{ADF8}"),  // 16-bit truncation of U+11173 - U+1161
        ("\u{1100}\u{1161}\u{11A7}x", "\u{AC00}x"),  // U+11A7 swallowed
        ("\u{16D67}\u{16D67}", "\u{16D67}\u{16D67}"),  // Unicode 16 composition unknown to CF
        ("\u{11F00}\u{300}", "\u{1F02}"),  // base compared on its low 16 bits
    ])
    func coreFoundationQuirks(input: String, expected: String) {
        expectNormalizes(input, to: expected)
    }

    @Test func tableIsParsed() {
        let data = CFUnicodeData.shared
        #expect(data.compatibility[0xFB01] == [0x66, 0x69])
        #expect(data.canonical[0xC5]?.mapping == [0x41, 0x30A])
        #expect(data.combiningClass[0x301] == 230)
        #expect(data.composition[UInt64(0x41) << 32 | 0x30A] == 0xC5)
    }
}
