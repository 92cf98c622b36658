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
//!
//! Behind a proxy the environment names (`HTTP_PROXY`, `HTTPS_PROXY`, `ALL_PROXY`) the client
//! resolves only the proxy: the target's name goes to the proxy unresolved, and the proxy,
//! which may well reach `localhost` or a private network, would connect wherever it points.
//! So while a proxy is named every target is judged before the request is made
//! ([`AddressRule::judge`]): its name resolved here, and every address it has must be allowed.

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

    /// Whether the environment names a proxy, which would resolve targets' names itself.
    pub(crate) fn proxied(&self) -> bool {
        !self.proxies.is_empty()
    }

    /// Whether a request to `url` may be made, judged before it can reach a proxy: an address
    /// it names must be allowed; while a proxy is named, its host name is resolved here and
    /// every address it has must be allowed (the proxy resolves it again and may pick any).
    /// Without a proxy a name is judged by the resolver as the client connects.
    ///
    /// # Errors
    ///
    /// Why the target may not be reached, naming its host (a URL a remote party chose holds
    /// no credential of ours).
    pub(crate) async fn judge(&self, url: &reqwest::Url) -> Result<(), String> {
        if let Some(ip) = literal(url) {
            return if self.allows(ip) {
                Ok(())
            } else {
                Err(format!(
                    "`{ip}` is not an address requests may reach: {WHY}"
                ))
            };
        }
        if !self.proxied() {
            return Ok(());
        }
        let Some(host) = url.host_str() else {
            return Err("the URL names no host".to_owned());
        };
        if self.proxies.contains(&host.to_ascii_lowercase()) {
            return Ok(());
        }
        let port = url.port_or_known_default().unwrap_or(443);
        let resolved: Vec<SocketAddr> = tokio::net::lookup_host((host, port))
            .await
            .map_err(|error| {
                format!("`{host}` cannot be resolved to be judged before it goes to the proxy ({error}): a target behind a proxy must resolve here too")
            })?
            .collect();
        match resolved.iter().find(|address| !self.allows(address.ip())) {
            None if !resolved.is_empty() => Ok(()),
            None => Err(format!("`{host}` has no address")),
            Some(refused) => Err(format!(
                "`{host}` resolves to {}, which requests may not reach, proxy or not: {WHY}",
                refused.ip()
            )),
        }
    }
}

/// Why an address is refused, as the errors say it.
const WHY: &str = "a name a remote party chose may reach a loopback or private address only \
                   when the configured URL is of that class, and never a link-local or reserved \
                   one";

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
                return Err(format!("no address of `{host}` is allowed: {WHY}").into());
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

    #[tokio::test]
    async fn behind_a_proxy_a_target_is_judged_before_the_request_is_made() {
        let url = |text: &str| reqwest::Url::parse(text).expect("a URL");
        let mut rule = AddressRule::of(&url("https://mcp.example/mcp"));
        // Without a proxy a name is the resolver's to judge; an address is judged at once.
        assert_eq!(rule.judge(&url("http://localhost:9/x")).await, Ok(()));
        assert!(rule.judge(&url("http://127.0.0.1:9/x")).await.is_err());
        // With one, a name that resolves to loopback never reaches it.
        rule.proxies = vec!["proxy.internal".into()];
        let refused = rule
            .judge(&url("http://localhost:9/x"))
            .await
            .expect_err("loopback behind a proxy");
        assert!(refused.contains("`localhost` resolves to"), "{refused}");
        assert!(
            rule.judge(&url("http://proxy.internal:3128/"))
                .await
                .is_ok()
        );
        let unresolvable = rule
            .judge(&url("http://no-such-host.invalid/x"))
            .await
            .expect_err("judged or refused");
        assert!(
            unresolvable.contains("cannot be resolved"),
            "{unresolvable}"
        );
        // From a loopback URL, loopback is fine either way.
        let mut local = AddressRule::of(&url("http://127.0.0.1:8080/mcp"));
        local.proxies = vec!["proxy.internal".into()];
        assert_eq!(local.judge(&url("http://localhost:9/x")).await, Ok(()));
    }
}
