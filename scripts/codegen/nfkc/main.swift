// Generator of Sources/AuthUnicode/CoreFoundationUnicodeTables.swift (scripts/codegen/nfkc/generate.sh).
//
// Uses full Foundation so that the tables reflect exactly the Unicode data of
// the Foundation whose NFKC output (`precomposedStringWithCompatibilityMapping`)
// we must reproduce. On Linux that API is implemented by swift-corelibs-
// foundation as CoreFoundation's CFStringNormalize(kCFStringNormalizationFormKC),
// which uses CoreFoundation's own Unicode tables (not ICU, not the stdlib's).
//
// Tables written:
//   compatibilityDecompositionData  every scalar whose NFKD (Foundation,
//       single scalar) differs from its NFD, mapped to that NFKD. Public API.
//   canonicalDecompositionData      CFUniCharDecomposeCharacter() of every
//       scalar in CF's canonical-decomposable set (Hangul syllables excepted),
//       with the smallest output-buffer size for which CF succeeds.
//   combiningClassData              CF's combining-class property (ranges).
//   nonBaseData                     CF's kCFUniCharNonBaseCharacterSet (ranges).
//   compositionData                 CF's canonical precomposition pairs.
// The CF data is read through symbols exported by libFoundation.so (dlsym);
// enum values are those of CFUniChar.h shipped with this toolchain.
//
// Usage: generator OUTPUT.swift          write the tables
//        generator --check OUTPUT.swift  exit 1 if OUTPUT.swift differs
import Foundation

// MARK: - CoreFoundation internals (exported from libFoundation.so)

let kNonBase: UInt32 = 8  // kCFUniCharNonBaseCharacterSet
let kCanonicalDecomposable: UInt32 = 9  // kCFUniCharCanonicalDecomposableCharacterSet
let kCompatDecomposable: UInt32 = 100  // kCFUniCharCompatibilityDecomposableCharacterSet
let kCombiningProperty: UInt32 = 0  // kCFUniCharCombiningProperty

func fail(_ message: String) -> Never {
    FileHandle.standardError.write("generator: \(message)\n".data(using: .utf8)!)
    exit(2)
}

let handle = dlopen(nil, RTLD_NOW)
func symbol<T>(_ name: String, _: T.Type) -> T {
    guard let p = dlsym(handle, name) else { fail("symbol \(name) not found in the loaded Foundation") }
    return unsafeBitCast(p, to: T.self)
}
let cfIsMemberOf = symbol("CFUniCharIsMemberOf", (@convention(c) (UInt32, UInt32) -> Bool).self)
let cfBitmapForPlane = symbol(
    "CFUniCharGetBitmapPtrForPlane",
    (@convention(c) (UInt32, UInt32) -> UnsafePointer<UInt8>?).self
)
let cfPropertyForPlane = symbol(
    "CFUniCharGetUnicodePropertyDataForPlane",
    (@convention(c) (UInt32, UInt32) -> UnsafeRawPointer?).self
)
let cfDecomposeCharacter = symbol(
    "CFUniCharDecomposeCharacter",
    (@convention(c) (UInt32, UnsafeMutablePointer<UInt32>, Int) -> Int).self
)
let cfPrecompose = symbol(
    "CFUniCharPrecompose",
    (@convention(c) (
        UnsafePointer<UInt16>, Int, UnsafeMutablePointer<Int>?,
        UnsafeMutablePointer<UInt16>, Int, UnsafeMutablePointer<Int>?
    ) -> Bool).self
)

/// CFUniCharIsMemberOfBitmap on the plane bitmap, as CFStringNormalize does.
func inBitmap(_ set: UInt32, _ c: UInt32) -> Bool {
    guard let bitmap = cfBitmapForPlane(set, c >> 16) else { return false }
    let low = c & 0xFFFF
    return bitmap[Int(low >> 3)] & UInt8(1 << (low & 7)) != 0
}

/// CFUniCharGetCombiningPropertyForCharacter on the plane data.
func combiningClass(_ c: UInt32) -> UInt8 {
    guard let raw = cfPropertyForPlane(kCombiningProperty, c >> 16) else { return 0 }
    let data = raw.assumingMemoryBound(to: UInt8.self)
    let low = Int(c & 0xFFFF)
    let value = Int(data[low >> 8])
    if value == 0 { return 0 }
    return data[256 + (value - 1) * 256 + low % 256]
}

func decompose(_ c: UInt32, max: Int) -> [UInt32] {
    var buffer = [UInt32](repeating: 0, count: 128)
    let n = buffer.withUnsafeMutableBufferPointer { cfDecomposeCharacter(c, $0.baseAddress!, max) }
    return Array(buffer.prefix(n))
}

func utf16(_ values: [UInt32]) -> [UInt16] {
    var out: [UInt16] = []
    for v in values { out.append(contentsOf: UTF16.encode(Unicode.Scalar(v)!)!) }
    return out
}

/// CFUniCharPrecompose on the two-character string base+combining; the
/// composite if CF composes them, else nil.
let precomposeSource = UnsafeMutablePointer<UInt16>.allocate(capacity: 4)
let precomposeOutput = UnsafeMutablePointer<UInt16>.allocate(capacity: 8)
func precompose(_ base: UInt32, _ combining: UInt32) -> UInt32? {
    let source = utf16([base, combining])
    for (i, u) in source.enumerated() { precomposeSource[i] = u }
    var consumed = 0
    var filled = 0
    let ok = cfPrecompose(precomposeSource, source.count, &consumed, precomposeOutput, 8, &filled)
    guard ok, consumed == source.count else { fail("CFUniCharPrecompose failed") }
    let output = Array(UnsafeBufferPointer(start: precomposeOutput, count: filled))
    if output == source { return nil }
    let result = Array(String(decoding: output, as: UTF16.self).unicodeScalars.map(\.value))
    guard result.count == 1 else { fail("unexpected precomposition \(result) for \(base) \(combining)") }
    return result[0]
}

// MARK: - Table construction

func hex(_ v: UInt32) -> String {
    let s = String(v, radix: 16, uppercase: true)
    return s.count >= 4 ? s : String(repeating: "0", count: 4 - s.count) + s
}

func ranges(_ values: [(UInt32, String)]) -> [String] {
    // values sorted by scalar; merges consecutive scalars with the same payload
    var lines: [String] = []
    var start: UInt32 = 0
    var end: UInt32 = 0
    var payload = ""
    var open = false
    func flush() {
        if open { lines.append(([hex(start), hex(end)] + (payload.isEmpty ? [] : [payload])).joined(separator: " ")) }
    }
    for (v, p) in values {
        if open && v == end + 1 && p == payload {
            end = v
            continue
        }
        flush()
        start = v
        end = v
        payload = p
        open = true
    }
    flush()
    return lines
}

func generate() -> (text: String, summary: String) {
    let hangul: ClosedRange<UInt32> = 0xAC00...0xD7A3
    var compat: [String] = []
    var compatCount = 0
    var canonical: [String] = []
    var combining: [(UInt32, String)] = []
    var nonBase: [(UInt32, String)] = []
    var decomposable: [UInt32] = []
    var decompositionElements = Set<UInt32>()

    for v in UInt32(0)...0x10FFFF {
        guard let scalar = Unicode.Scalar(v) else { continue }  // skips surrogates
        let s = String(Character(scalar))
        let nfkd = s.decomposedStringWithCompatibilityMapping
        let nfd = s.decomposedStringWithCanonicalMapping
        let isCanonical = inBitmap(kCanonicalDecomposable, v)
        if isCanonical != cfIsMemberOf(v, kCanonicalDecomposable) { fail("bitmap mismatch (canonical) at \(hex(v))") }
        if inBitmap(kNonBase, v) != cfIsMemberOf(v, kNonBase) { fail("bitmap mismatch (non-base) at \(hex(v))") }

        if !nfkd.unicodeScalars.elementsEqual(nfd.unicodeScalars) {
            compat.append(([v] + nfkd.unicodeScalars.map(\.value)).map(hex).joined(separator: " "))
            compatCount += 1
        }
        // The normaliser treats "has an NFKD entry and is not canonically
        // decomposable" as CF's compatibility-decomposable set: check that.
        let inCompatTable = !nfkd.unicodeScalars.elementsEqual(nfd.unicodeScalars) && !isCanonical
        if inCompatTable != cfIsMemberOf(v, kCompatDecomposable) {
            fail("compatibility set mismatch at \(hex(v))")
        }
        if isCanonical {
            if hangul.contains(v) { continue }
            let full = decompose(v, max: 64)
            var budget = 0
            if !full.isEmpty {
                budget = (1...64).first { !decompose(v, max: $0).isEmpty }!
                if decompose(v, max: budget) != full { fail("inconsistent decomposition at \(hex(v))") }
            }
            canonical.append(([hex(v), String(budget)] + full.map(hex)).joined(separator: " "))
            decomposable.append(v)
            decompositionElements.formUnion(full)
        } else if hangul.contains(v) {
            fail("Hangul syllable \(hex(v)) not canonically decomposable in CF")
        }
        let ccc = combiningClass(v)
        if ccc != 0 { combining.append((v, String(ccc))) }
        if inBitmap(kNonBase, v) { nonBase.append((v, "")) }
    }
    if inBitmap(kCanonicalDecomposable, 0xD7A4) { fail("D7A4 decomposable") }
    // The port reproduces CFUniCharCompatibilityDecompose only for buffers with
    // at most one compatibility-decomposable character, at the front (with more,
    // CF can read stale buffer memory). Check that no input can produce more.
    for v in UInt32(0)...0x10FFFF where cfIsMemberOf(v, kCompatDecomposable) && combiningClass(v) != 0 {
        fail("compatibility-decomposable \(hex(v)) has a non-zero combining class")
    }
    for v in decomposable
    where decompose(v, max: 64).dropFirst().contains(where: { cfIsMemberOf($0, kCompatDecomposable) }) {
        fail("canonical decomposition of \(hex(v)) has a compatibility-decomposable non-initial character")
    }

    // Precomposition pairs: every base that can be the first half of a
    // canonical decomposition, with every non-base character (the normaliser
    // only ever asks CF to compose with a non-base second character).
    let bases = Set(decomposable).union(decompositionElements).sorted()
    var composition: [String] = []
    for (c, _) in nonBase {
        for b in bases where !(0x1100...0x11FF).contains(b) {
            if let p = precompose(b, c) { composition.append("\(hex(b)) \(hex(c)) \(hex(p))") }
        }
    }
    composition.sort()

    // CFUniCharPrecomposeCharacter looks the base up as a UTF16Char (i.e.
    // truncated to 16 bits) for combining characters whose composites are all
    // in the BMP table. Record which combining characters behave like that.
    var sixteenBitBase: [(UInt32, String)] = []
    let byCombining = Dictionary(
        grouping: composition.map { $0.split(separator: " ").map { UInt32($0, radix: 16)! } },
        by: { $0[1] }
    )
    for (c, pairs) in byCombining.sorted(by: { $0.key < $1.key }) {
        let truncated = pairs.allSatisfy { p in
            p[0] <= 0xFFFF && [0x10000, 0x20000, 0xE0000].allSatisfy { precompose(p[0] + $0, c) == p[2] }
        }
        let exact = pairs.allSatisfy { p in
            [0x10000, 0x20000, 0xE0000].allSatisfy { p[0] > 0xFFFF || precompose(p[0] + $0, c) == nil }
        }
        guard truncated != exact else { fail("cannot classify precomposition base lookup for \(hex(c))") }
        if truncated { sixteenBitBase.append((c, "")) }
    }

    let combiningLines = ranges(combining)
    let nonBaseLines = ranges(nonBase.map { ($0.0, "") })
    func literal(_ name: String, _ doc: String, _ lines: [String]) -> String {
        "\(doc)\nlet \(name) = #\"\"\"\n\(lines.joined(separator: "\n"))\n\"\"\"#\n"
    }
    var out = """
        // GENERATED FILE - DO NOT EDIT.
        // Generated by scripts/codegen/nfkc/main.swift: scripts/codegen/nfkc/generate.sh (CI runs it with --check).
        // Source: Foundation (swift-corelibs-foundation / CoreFoundation) of the
        // generating toolchain, so that UnicodeNFKC.normalize reproduces exactly its
        // String.precomposedStringWithCompatibilityMapping (CFStringNormalize, form KC).
        // Numbers are hexadecimal, except buffer sizes and combining classes (decimal).
        // Entries: \(compatCount) compatibility decompositions, \(canonical.count) canonical decompositions,
        // \(combining.count) scalars with a non-zero combining class, \(nonBase.count) non-base scalars,
        // \(composition.count) precomposition pairs (\(sixteenBitBase.count) combining characters with 16-bit base lookup).

        """
    let tables: [(name: String, documentation: String, lines: [String])] = [
        (
            "compatibilityDecompositionData",
            "/// Every scalar whose full compatibility decomposition (Foundation NFKD of the\n/// single scalar) differs from its full canonical decomposition (NFD), mapped to\n/// that NFKD. Format: `SCALAR NFKD...`.",
            compat
        ),
        (
            "canonicalDecompositionData",
            "/// CF's canonical-decomposable scalars except Hangul syllables (algorithmic):\n/// `SCALAR MINBUFFER DECOMPOSITION...` where MINBUFFER (decimal) is the smallest\n/// buffer for which CFUniCharDecomposeCharacter succeeds (0 = never).",
            canonical
        ),
        (
            "combiningClassData",
            "/// CF's canonical combining classes: `FIRST LAST CLASS` (CLASS decimal), all others 0.",
            combiningLines
        ),
        ("nonBaseData", "/// CF's non-base character set: `FIRST LAST`.", nonBaseLines),
        ("compositionData", "/// CF's canonical precomposition pairs: `BASE COMBINING COMPOSITE`.", composition),
        (
            "sixteenBitBaseCombiningData",
            "/// Combining characters (`FIRST LAST`) for which CF matches the base of a\n/// precomposition on its low 16 bits only (CFUniCharPrecomposeCharacter passes\n/// it as a UTF16Char), e.g. U+11F00 + U+0300 composes like U+1F00 + U+0300.",
            ranges(sixteenBitBase)
        ),
    ]
    for table in tables {
        out += "\n" + literal(table.name, table.documentation, table.lines)
    }
    let summary =
        "\(compatCount) compatibility decompositions, \(canonical.count) canonical decompositions, "
        + "\(combining.count) combining-class scalars (\(combiningLines.count) ranges), "
        + "\(nonBase.count) non-base scalars (\(nonBaseLines.count) ranges), \(composition.count) compositions, \(sixteenBitBase.count) combining characters with 16-bit base lookup"
    return (out, summary)
}

var args = Array(CommandLine.arguments.dropFirst())
var check = false
if args.first == "--check" {
    check = true
    args.removeFirst()
}
guard args.count == 1 else { fail("usage: generator [--check] OUTPUT.swift") }
let path = args[0]
let (text, summary) = generate()
if check {
    let existing = try? String(contentsOfFile: path, encoding: .utf8)
    if existing != text {
        FileHandle.standardError.write(
            "\(path) is out of date; regenerate with scripts/codegen/nfkc/generate.sh\n".data(using: .utf8)!
        )
        exit(1)
    }
    print("\(path) is up to date (\(summary))")
} else {
    try text.write(toFile: path, atomically: true, encoding: .utf8)
    print("wrote \(path) (\(summary))")
}
