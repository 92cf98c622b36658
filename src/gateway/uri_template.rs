//! Whether a URI is one a resource template (RFC 6570) can expand to: what the gateway asks
//! before it lets a template claim a URI no server lists.
//!
//! A match is decided per expression by what its operator may expand to: a simple `{x}` is
//! unreserved characters, percent-encodings and commas (never a `/`, `?` or `#`), so
//! `scheme://{x}` does not claim `scheme://a/b`; `{+x}` and `{#x}` take reserved characters
//! too; `{/x}`, `{.x}`, `{;x}`, `{?x}` and `{&x}` begin with their operator's character or
//! expand to nothing. The match runs in time linear in the URI for each expression (the set
//! of positions an expression can end at is carried forward), so no template and URI make it
//! backtrack.

/// A parsed URI template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct UriTemplate {
    parts: Vec<Part>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Literal(String),
    Expression(Operator),
}

/// An expression's operator (RFC 6570 §3.2), which decides what it may expand to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Operator {
    Simple,
    Reserved,
    Fragment,
    Label,
    Path,
    PathParameter,
    Query,
    Continuation,
}

impl Operator {
    fn of(expression: &str) -> Self {
        match expression.chars().next() {
            Some('+') => Self::Reserved,
            Some('#') => Self::Fragment,
            Some('.') => Self::Label,
            Some('/') => Self::Path,
            Some(';') => Self::PathParameter,
            Some('?') => Self::Query,
            Some('&') => Self::Continuation,
            _ => Self::Simple,
        }
    }

    /// The character a non-empty expansion starts with.
    fn lead(self) -> Option<u8> {
        match self {
            Self::Simple | Self::Reserved => None,
            Self::Fragment => Some(b'#'),
            Self::Label => Some(b'.'),
            Self::Path => Some(b'/'),
            Self::PathParameter => Some(b';'),
            Self::Query => Some(b'?'),
            Self::Continuation => Some(b'&'),
        }
    }

    /// Whether `byte` may appear in the expansion after its lead.
    fn takes(self, byte: u8) -> bool {
        let unreserved = byte.is_ascii_alphanumeric() || b"-._~%,".contains(&byte);
        match self {
            Self::Simple => unreserved,
            // An exploded list repeats the operator's own separator.
            Self::Label => unreserved || byte == b'.',
            Self::Path => unreserved || byte == b'/',
            Self::PathParameter => unreserved || b";=".contains(&byte),
            Self::Query | Self::Continuation => unreserved || b"&=".contains(&byte),
            Self::Reserved | Self::Fragment => byte.is_ascii_graphic(),
        }
    }
}

impl UriTemplate {
    /// Reads `template`; `None` when its braces do not pair up (such a template claims
    /// nothing).
    pub(super) fn parse(template: &str) -> Option<Self> {
        let mut parts = Vec::new();
        let mut rest = template;
        while !rest.is_empty() {
            match rest.find(['{', '}']) {
                None => {
                    parts.push(Part::Literal(rest.to_owned()));
                    break;
                }
                Some(at) if rest.as_bytes()[at] == b'}' => return None,
                Some(at) => {
                    if at > 0 {
                        parts.push(Part::Literal(rest[..at].to_owned()));
                    }
                    let close = rest[at..].find('}')? + at;
                    let expression = &rest[at + 1..close];
                    if expression.is_empty() || expression.contains('{') {
                        return None;
                    }
                    parts.push(Part::Expression(Operator::of(expression)));
                    rest = &rest[close + 1..];
                }
            }
        }
        Some(Self { parts })
    }

    /// Whether some values of the template's variables expand it to exactly `uri`.
    pub(super) fn matches(&self, uri: &str) -> bool {
        let bytes = uri.as_bytes();
        // `at[p]`: the parts so far can expand to exactly `uri[..p]`.
        let mut at = vec![false; bytes.len() + 1];
        at[0] = true;
        for part in &self.parts {
            let mut next = vec![false; bytes.len() + 1];
            match part {
                Part::Literal(literal) => {
                    for (p, reached) in at.iter().enumerate() {
                        if *reached && bytes[p..].starts_with(literal.as_bytes()) {
                            next[p + literal.len()] = true;
                        }
                    }
                }
                Part::Expression(operator) => {
                    // Every expansion may be empty (an undefined variable).
                    let mut open = false;
                    for p in 0..=bytes.len() {
                        if at[p] {
                            next[p] = true;
                        }
                        if open {
                            next[p] = true;
                        }
                        if p == bytes.len() {
                            break;
                        }
                        let byte = bytes[p];
                        let starts = at[p]
                            && match operator.lead() {
                                None => operator.takes(byte),
                                Some(lead) => lead == byte,
                            };
                        open = (open && operator.takes(byte)) || starts;
                    }
                }
            }
            if !next.contains(&true) {
                return false;
            }
            at = next;
        }
        at[bytes.len()]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matches(template: &str, uri: &str) -> bool {
        UriTemplate::parse(template).is_some_and(|template| template.matches(uri))
    }

    #[test]
    fn a_simple_expression_takes_one_segment_only() {
        assert!(matches("test://{x}", "test://other"));
        assert!(matches("test://{x}", "test://"));
        assert!(matches("test://{x}", "test://a%2Fb,c"));
        assert!(!matches("test://{x}", "test://a/b"));
        assert!(!matches("test://{x}", "test://a?b"));
        assert!(!matches("test://{x}", "file://a"));
        assert!(matches("test://deep/{y}", "test://deep/1"));
        assert!(matches(
            "test://template/{id}/data",
            "test://template/7/data"
        ));
        assert!(!matches(
            "test://template/{id}/data",
            "test://template/7/other"
        ));
        assert!(matches("a://{x}-{y}", "a://1-2"));
        assert!(matches("literal://only", "literal://only"));
        assert!(!matches("literal://only", "literal://only/more"));
    }

    #[test]
    fn operators_expand_as_rfc_6570_says() {
        assert!(matches("file:///{+path}", "file:///etc/hosts"));
        assert!(matches("doc://x{#frag}", "doc://x#a/b"));
        assert!(matches("doc://x{#frag}", "doc://x"));
        assert!(!matches("doc://x{#frag}", "doc://xy"));
        assert!(matches("repo://r{/path*}", "repo://r/a/b"));
        assert!(matches("repo://r{/path*}", "repo://r"));
        assert!(!matches("repo://r{/path*}", "repo://rab"));
        assert!(matches("q://s{?a,b}", "q://s?a=1&b=2"));
        assert!(matches("q://s{?a}{&b}", "q://s?a=1&b=2"));
        assert!(matches("h://x{.ext}", "h://x.tar.gz"));
        assert!(matches("m://x{;p}", "m://x;p=1"));
    }

    #[test]
    fn unpaired_braces_claim_nothing() {
        for broken in ["a://{x", "a://x}", "a://{}", "a://{{x}}"] {
            assert_eq!(UriTemplate::parse(broken), None, "{broken}");
        }
    }

    #[test]
    fn many_expressions_over_a_long_uri_stay_linear() {
        let template = UriTemplate::parse(&"{+a}".repeat(64)).expect("a template");
        // A backtracking matcher would try every split of the URI among 64 expressions and
        // never end; this one carries positions forward and ends at once.
        let uri = "x".repeat(8_192) + "\u{7f}";
        assert!(!template.matches(&uri));
        assert!(template.matches(&"x".repeat(8_192)));
    }
}
