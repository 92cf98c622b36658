//! The address rule for requests to URLs a remote party chose: which addresses a name it gives
//! may resolve to, judged against the URL the operator configured.
//!
//! A name (or a literal address) that an authorization server's metadata, a server's
//! challenge or a fetched OpenAPI document supplies may reach a loopback or private address
//! only when the operator's own URL is of that class, and never a link-local or otherwise
//! reserved one (cloud metadata lives at 169.254.169.254). rmcp applies such a rule only to
//! its own OAuth client; OAuth requests (`auth/dpop.rs`) and tool sources (`crate::sources`) get
//! it here, as the resolver of their clients plus a check of URLs that name an address
//! themselves, which never go through a resolver.

use std::net::{IpAddr, SocketAddr};

use reqwest::dns::{Addrs, Name, Resolve, Resolving};

/// Which addresses requests made on behalf of a configured URL may reach: public ones, and
/// loopback or private ones only when the configured URL is of that class (and a proxy the
/// environment names wherever it is).
#[derive(Clone)]
pub(crate) struct AddressRule {
    /// The server's own address, when its URL names one.
    base_ip: Option<IpAddr>,
    /// The non-public classes its URL is of.
    classes: Vec<Class>,
    /// The hosts of the proxies the environment names: reached wherever they are.
    proxies: Vec<String>,
}

/// The variables that name a proxy for reqwest.
const PROXY_VARIABLES: [&str; 6] = [
    "HTTP_PROXY",
    "http_proxy",
    "HTTPS_PROXY",
    "https_proxy",
    "ALL_PROXY",
    "all_proxy",
];

#[derive(Clone, Copy, PartialEq, Eq)]
enum Class {
    Public,
    Loopback,
    Private,
    Reserved,
}

impl Class {
    fn of(ip: IpAddr) -> Self {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
            v4 => v4,
        };
        match ip {
            IpAddr::V4(v4) => {
                let [a, b, ..] = v4.octets();
                if v4.is_loopback() {
                    Self::Loopback
                } else if v4.is_private() || (a == 100 && (64..=127).contains(&b)) {
                    Self::Private
                } else if v4.is_link_local()
                    || v4.is_broadcast()
                    || v4.is_unspecified()
                    || v4.is_multicast()
                    || a == 0
                    || (a == 198 && matches!(b, 18 | 19))
                {
                    Self::Reserved
                } else {
                    Self::Public
                }
            }
            IpAddr::V6(v6) => {
                let first = v6.segments()[0];
                if v6.is_loopback() {
                    Self::Loopback
                } else if (first & 0xfe00) == 0xfc00 {
                    Self::Private
                } else if v6.is_unspecified() || v6.is_multicast() || (first & 0xffc0) == 0xfe80 {
                    Self::Reserved
                } else {
                    Self::Public
                }
            }
        }
    }
}

impl AddressRule {
    /// The rule for requests made on behalf of `base`, the URL the operator configured.
    pub(crate) fn of(base: &reqwest::Url) -> Self {
        let base_ip = literal(base);
        let classes = match (base_ip, base.host_str()) {
            (Some(ip), _) => vec![Class::of(ip)],
            (None, Some(host)) => {
                let host = host.trim_end_matches('.').to_ascii_lowercase();
                if host == "localhost" || host.ends_with(".localhost") {
                    vec![Class::Loopback]
                } else {
                    Vec::new()
                }
            }
            (None, None) => Vec::new(),
        };
        let proxies = PROXY_VARIABLES
            .iter()
            .filter_map(|variable| std::env::var(variable).ok())
            .filter_map(|proxy| {
                let proxy = if proxy.contains("://") {
                    proxy
                } else {
                    format!("http://{proxy}")
                };
                let url = reqwest::Url::parse(&proxy).ok()?;
                url.host_str().map(|host| host.to_ascii_lowercase())
            })
            .collect();
        Self {
            base_ip,
            classes,
            proxies,
        }
    }

    fn allows(&self, ip: IpAddr) -> bool {
        match Class::of(ip) {
            Class::Public => true,
            Class::Reserved => false,
            class => self.base_ip == Some(ip) || self.classes.contains(&class),
        }
    }

    /// Whether `url`, when it names an address itself, names an allowed one.
    pub(crate) fn allows_url(&self, url: &reqwest::Url) -> bool {
        literal(url).is_none_or(|ip| self.allows(ip))
    }
}

/// The address `url` names itself, if it names one rather than a host name.
fn literal(url: &reqwest::Url) -> Option<IpAddr> {
    let host = url.host_str()?;
    host.trim_start_matches('[')
        .trim_end_matches(']')
        .parse()
        .ok()
}

impl Resolve for AddressRule {
    fn resolve(&self, name: Name) -> Resolving {
        let rule = self.clone();
        Box::pin(async move {
            let host = name.as_str().to_owned();
            let resolved: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            // A proxy the operator configured is theirs to place, on a private network too.
            if rule.proxies.contains(&host.to_ascii_lowercase()) {
                return Ok(Box::new(resolved.into_iter()) as Addrs);
            }
            let allowed: Vec<SocketAddr> = resolved
                .into_iter()
                .filter(|address| rule.allows(address.ip()))
                .collect();
            if allowed.is_empty() {
                return Err(format!("no address of `{host}` is allowed: a name may resolve to a loopback or private address only when the configured URL is of that class, and never to a link-local or reserved one").into());
            }
            Ok(Box::new(allowed.into_iter()) as Addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_or_private_addresses_are_reached_only_from_a_configured_url_of_that_class() {
        let rule = |url: &str| AddressRule::of(&reqwest::Url::parse(url).expect("a URL"));
        let ip = |text: &str| text.parse::<IpAddr>().expect("an address");
        let public = rule("https://mcp.example/mcp");
        assert!(public.allows(ip("93.184.216.34")));
        assert!(!public.allows(ip("127.0.0.1")));
        assert!(!public.allows(ip("10.0.0.9")));
        assert!(
            !public.allows(ip("::ffff:127.0.0.1")),
            "a mapped loopback address"
        );
        assert!(
            !public.allows(ip("169.254.169.254")),
            "link-local: cloud metadata"
        );
        let loopback = rule("http://localhost:3000/mcp");
        assert!(loopback.allows(ip("127.0.0.1")) && loopback.allows(ip("::1")));
        assert!(!loopback.allows(ip("192.168.1.2")));
        let private = rule("http://10.1.2.3/mcp");
        assert!(private.allows(ip("10.9.9.9")) && private.allows(ip("fd00::1")));
        assert!(!private.allows(ip("127.0.0.1")));
        assert!(!private.allows(ip("fe80::1")) && !private.allows(ip("0.0.0.0")));
        assert!(!public.allows_url(&reqwest::Url::parse("http://[::1]/x").expect("a URL")));
        assert!(public.allows_url(&reqwest::Url::parse("http://as.example/x").expect("a URL")));
    }

    #[tokio::test]
    async fn a_name_that_resolves_to_a_refused_address_is_not_reached() {
        let rule = |url: &str| AddressRule::of(&reqwest::Url::parse(url).expect("a URL"));
        let name = |host: &str| host.parse::<Name>().expect("a name");
        let from_public = rule("https://mcp.example/mcp")
            .resolve(name("localhost"))
            .await;
        assert!(from_public.is_err(), "localhost is loopback");
        let from_loopback = rule("http://127.0.0.1:9/mcp")
            .resolve(name("localhost"))
            .await
            .expect("loopback from a loopback server");
        assert!(
            from_loopback
                .into_iter()
                .all(|address| address.ip().is_loopback())
        );
        // A configured proxy is reached wherever it is.
        let mut proxied = rule("https://mcp.example/mcp");
        proxied.proxies = vec!["localhost".into()];
        assert!(proxied.resolve(name("localhost")).await.is_ok());
    }
}
