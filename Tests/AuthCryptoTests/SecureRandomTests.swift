import Testing

@testable import AuthCrypto

@Suite struct SecureRandomTests {
    @Test func bytes() {
        #expect(SecureRandom.bytes(count: 0).isEmpty)
        #expect(SecureRandom.bytes(count: 33).count == 33)
        // Two 32-byte draws collide with probability 2^-256.
        #expect(SecureRandom.bytes(count: 32) != SecureRandom.bytes(count: 32))
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
