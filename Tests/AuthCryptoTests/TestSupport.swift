// Helpers shared by the AuthCrypto tests.

import AuthCrypto
import Testing

/// Expects `body` to throw a ``CryptoError`` with `code`.
func expectCryptoError<R>(
    _ code: CryptoError.Code,
    sourceLocation: SourceLocation = #_sourceLocation,
    _ body: () throws -> R
) {
    do {
        _ = try body()
        Issue.record("succeeded; expected CryptoError \(code)", sourceLocation: sourceLocation)
    } catch let error as CryptoError {
        #expect(error.code == code, "\(error)", sourceLocation: sourceLocation)
    } catch {
        Issue.record("threw \(error); expected CryptoError \(code)", sourceLocation: sourceLocation)
    }
}

/// Bytes from a hex string; spaces and newlines are ignored (vectors are pasted as printed).
func hex(_ string: String) -> [UInt8] {
    let digits = string.unicodeScalars.filter { !$0.properties.isWhitespace }.map { Character($0) }
    precondition(digits.count % 2 == 0, "odd hex length")
    var bytes: [UInt8] = []
    bytes.reserveCapacity(digits.count / 2)
    var index = 0
    while index < digits.count {
        bytes.append(UInt8(String(digits[index...index + 1]), radix: 16)!)
        index += 2
    }
    return bytes
}

/// Lower-case hex of `bytes`.
func hexString(_ bytes: [UInt8]) -> String {
    bytes.map { byte in
        let text = String(byte, radix: 16)
        return byte < 16 ? "0" + text : text
    }.joined()
}

/// `bytes` as UTF-8.
func utf8(_ string: String) -> [UInt8] {
    Array(string.utf8)
}

/// `bytes` with bit `bit` of byte `index` flipped.
func flippingBit(_ bytes: [UInt8], at index: Int, bit: Int = 0) -> [UInt8] {
    var copy = bytes
    copy[index] ^= UInt8(1) << UInt8(bit)
    return copy
}
