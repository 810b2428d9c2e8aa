import Testing

@testable import AuthCrypto

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

@Suite struct SecureRandomTests {
    @Test func bytes() {
        #expect(SecureRandom.bytes(count: 0).isEmpty)
        #expect(SecureRandom.bytes(count: 33).count == 33)
        // Two 32-byte draws collide with probability 2^-256.
        #expect(SecureRandom.bytes(count: 32) != SecureRandom.bytes(count: 32))
    }

    @Test("uuid(): version 4, variant 10, the other 122 bits random")
    func uuid() {
        var seen = Set<UUID>()
        var ones = [Int](repeating: 0, count: 128)
        let draws = 2_000
        for _ in 0..<draws {
            let uuid = SecureRandom.uuid()
            seen.insert(uuid)
            let text = uuid.uuidString.lowercased()
            // xxxxxxxx-xxxx-4xxx-[89ab]xxx-xxxxxxxxxxxx
            let characters = Array(text)
            #expect(characters[14] == "4", "\(text)")
            #expect("89ab".contains(characters[19]), "\(text)")
            #expect(UUID(uuidString: text) == uuid)
            withUnsafeBytes(of: uuid.uuid) { raw in
                for bit in 0..<128 where raw[bit / 8] & (0x80 >> (bit % 8)) != 0 { ones[bit] += 1 }
            }
        }
        #expect(seen.count == draws)
        // Fixed bits: the version (bits 48–51 = 0100) and the variant (bits 64–65 = 10).
        let fixed: [Int: Int] = [48: 0, 49: draws, 50: 0, 51: 0, 64: draws, 65: 0]
        for bit in 0..<128 {
            if let expected = fixed[bit] {
                #expect(ones[bit] == expected, "bit \(bit)")
            } else {
                // Binomial(2000, 0.5): standard deviation ≈ 22; ±250 is over 11 of them.
                #expect((750...1_250).contains(ones[bit]), "bit \(bit) set in \(ones[bit]) of \(draws)")
            }
        }
    }

    @Test func uniformEdges() {
        for _ in 0..<100 {
            #expect(SecureRandom.uniform(below: UInt32(1)) == 0)
            #expect(SecureRandom.uniform(below: UInt32.max) < UInt32.max)
            #expect(SecureRandom.uniform(below: UInt32(3)) < 3)
            #expect(SecureRandom.uniform64(below: UInt64.max) < UInt64.max)
            #expect(SecureRandom.uniform(below: 7) < 7)  // a plain literal is not ambiguous
        }
    }

    @Test("uniform(below: 10): 100 000 draws spread evenly")
    func uniformDistribution() {
        let draws = 100_000
        var buckets = [Int](repeating: 0, count: 10)
        for _ in 0..<draws {
            buckets[Int(SecureRandom.uniform(below: UInt32(10)))] += 1
        }
        // Each bucket is Binomial(100000, 0.1): mean 10000, standard deviation ≈ 95. ±800 is more
        // than 8 standard deviations, so a correct generator essentially never fails (p < 1e-15),
        // while a generator that ignored a bucket or doubled one would.
        for count in buckets {
            #expect((9_200...10_800).contains(count), "bucket counts \(buckets)")
        }
    }

    @Test func numericCode() {
        for _ in 0..<1000 {
            let code = SecureRandom.numericCode()
            #expect(code.count == 6)
            #expect(code.allSatisfy { $0.isASCII && $0.isNumber })
        }
        #expect(SecureRandom.numericCode(digits: 1).count == 1)
        #expect(SecureRandom.numericCode(digits: 19).count == 19)
    }

    @Test("numeric codes keep leading zeros")
    func numericCodeLeadingZeros() {
        // With 2 digits, "0x" codes appear with probability 0.1 each draw: in 2000 draws the
        // chance of seeing none is 0.9^2000 ≈ 1e-92.
        var sawLeadingZero = false
        for _ in 0..<2000 {
            let code = SecureRandom.numericCode(digits: 2)
            #expect(code.count == 2)
            if code.first == "0" { sawLeadingZero = true }
        }
        #expect(sawLeadingZero)
    }
}
