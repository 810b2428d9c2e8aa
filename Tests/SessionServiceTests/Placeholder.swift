import Testing

@Test func sessionPlaceholder() { #expect(Bool(true)) }
