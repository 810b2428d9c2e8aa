import Testing

@testable import AuthDevProvider

@Suite struct FormPostPageTests {
    @Test func valuesAreEscapedAndReadBackExactly() {
        let hostile = "\"><script>alert('x')</script>&amp;"
        let page = FormPostPage.render(
            action: "https://app.example/cb?a=1&b=\"2\"",
            fields: [
                (name: "code", value: "c0de"), (name: "state", value: hostile),
                (name: "user", value: "{\"a\":\"<b>\"}"),
            ]
        )
        #expect(!page.contains("<script>"))
        #expect(page.contains("<form method=\"post\" action=\"https://app.example/cb?a=1&amp;b=&quot;2&quot;\">"))
        #expect(DevOAuthProvider.formAction(inPage: page) == "https://app.example/cb?a=1&b=\"2\"")
        #expect(
            DevOAuthProvider.formFields(inPage: page) == ["code": "c0de", "state": hostile, "user": "{\"a\":\"<b>\"}"]
        )
    }

    @Test func readsPagesWrittenOtherwise() {
        let page = """
            <FORM id=f METHOD=POST ACTION='https://x.example/cb'>
              <INPUT TYPE=HIDDEN NAME=code VALUE=abc>
              <input type="hidden" value="caf&#233; &#x26; &lt;3" name="state"/>
              <input type="text" name="visible" value="no">
            </FORM>
            """
        #expect(DevOAuthProvider.formAction(inPage: page) == "https://x.example/cb")
        #expect(DevOAuthProvider.formFields(inPage: page) == ["code": "abc", "state": "café & <3"])
        #expect(DevOAuthProvider.formAction(inPage: "<p>no form</p>") == nil)
        #expect(FormPostPage.unescape("a &unknown; & b &#xZZ;") == "a &unknown; & b &#xZZ;")
    }
}
