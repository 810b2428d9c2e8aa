import AuthCrypto
import Testing

@Suite struct ConstantTimeTests {
    @Test func equality() {
        #expect(ConstantTime.equals([], []))
        #expect(ConstantTime.equals([1, 2, 3], [1, 2, 3]))
        #expect(!ConstantTime.equals([1, 2, 3], [1, 2, 4]))
        #expect(!ConstantTime.equals([0, 2, 3], [1, 2, 3]))
    }

    @Test func differentLengthsAreUnequal() {
        #expect(!ConstantTime.equals([1, 2, 3], [1, 2]))
        #expect(!ConstantTime.equals([], [0]))
        #expect(!ConstantTime.equals([1, 2], [1, 2, 0]))
    }
}
