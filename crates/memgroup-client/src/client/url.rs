//! `memcache://` URLs: [`ClientUrl`] takes one apart into the cluster and
//! the client's own settings it carries, [`ClientBuilder::url`] applies
//! them all, and [`Client::connect`] connects to one (or to a plain server
//! list).

use memgroup_topology::ClusterSpec;

use super::{Client, ClientBuilder};
use crate::conn::Credentials;
use crate::error::{Error, ErrorKind};
use crate::value::ValueFormat;

impl Client {
    /// Connects to a cluster described by a `memcache://` URL or a plain
    /// `host:port[:weight],…` list (one group), opening connections eagerly.
    ///
    /// A URL may carry credentials, percent-encoded, the client's value
    /// format and TLS (see [`ClientUrl`]) besides the cluster parameters of
    /// [`ClusterSpec::parse_url`]:
    /// `memcache://user:p%40ss@10.0.0.1:11211,10.0.0.2:11211?hash=ketama&value_format=evcache&tls_ca=/etc/ca.pem`.
    /// For other settings (timeouts, limits), start from
    /// [`ClientBuilder::url`] instead.
    pub async fn connect(url_or_servers: &str) -> Result<Client, Error> {
        let builder = if url_or_servers.starts_with("memcache://") {
            Client::builder().url(url_or_servers)
        } else {
            Client::builder().servers(url_or_servers)
        };
        builder.connect().await
    }
}

impl ClientBuilder {
    /// Adds the cluster of a `memcache://` URL with every setting it
    /// carries (see [`ClientUrl`]): its groups, hashing, pool size, zone,
    /// policies and backoff, and the login, value format and TLS.
    ///
    /// Like [`ClientBuilder::cluster`], the URL's zone and policies replace
    /// the builder's: call this first, then the builder's other methods
    /// (timeouts, limits, …), which then win over the URL.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use memgroup_client::Client;
    ///
    /// # async fn demo() -> Result<(), memgroup_client::Error> {
    /// let client = Client::builder()
    ///     .url("memcache://app:p%40ss@10.0.0.1:11211,10.0.0.2:11211?hash=ketama&value_format=evcache")
    ///     .timeout(Duration::from_millis(200))
    ///     .build()?;
    /// client.set("user:42", "Ada", 300).await?;
    /// # Ok(()) }
    /// ```
    pub fn url(self, url: &str) -> ClientBuilder {
        let url = match ClientUrl::parse(url) {
            Ok(url) => url,
            Err(e) => return self.failed(e),
        };
        let mut builder = self.cluster(url.spec);
        if let Some(credentials) = url.credentials {
            builder = builder.credentials(credentials);
        }
        if let Some(format) = url.value_format {
            builder = builder.value_format(format);
        }
        #[cfg(feature = "tls")]
        if let Some(tls) = url.tls {
            builder = builder.tls(tls);
        }
        builder
    }
}

/// A `memcache://` URL taken apart: the cluster (see
/// [`ClusterSpec::parse_url`]) and the client's own settings it may carry,
/// `user:password@` (percent-encoded), `value_format=`, and TLS: `tls=true`
/// (trusting the platform's roots), `tls_ca=PATH` (trusting that PEM
/// bundle; implies `tls=true`) and `tls_server_name=NAME`. Values are
/// percent-decoded.
///
/// ```
/// use memgroup_client::ClientUrl;
/// let url = ClientUrl::parse("memcache://app:p%40ss@h1:11211,h2:11211?hash=ketama&value_format=evcache")?;
/// assert_eq!(url.spec.groups[0].servers.len(), 2);
/// assert_eq!(url.credentials.unwrap().username(), "app");
/// assert_eq!(url.value_format.unwrap().name(), "evcache");
/// # Ok::<(), memgroup_client::Error>(())
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ClientUrl {
    /// The cluster.
    pub spec: ClusterSpec,
    /// The login, when the URL has `user:password@`.
    pub credentials: Option<Credentials>,
    /// The value format, when the URL has `value_format=`.
    pub value_format: Option<ValueFormat>,
    /// TLS, when the URL has `tls=true` (the platform's roots), `tls_ca=PATH`
    /// (that CA bundle) or `tls_server_name=NAME` (feature `tls`).
    #[cfg(feature = "tls")]
    pub tls: Option<crate::TlsConfig>,
}

impl ClientUrl {
    /// Parses a `memcache://` URL.
    pub fn parse(url: &str) -> Result<ClientUrl, Error> {
        let rest = url.strip_prefix("memcache://").ok_or_else(|| {
            Error::new(ErrorKind::Config, format!("not a memcache:// URL: {url:?}"))
        })?;
        let (credentials, rest) = url_credentials(rest)?;
        let (params, rest) = url_client_params(rest)?;
        let value_format = params
            .iter()
            .find(|(name, _)| *name == "value_format")
            .map(|(_, v)| v.parse())
            .transpose()?;
        #[cfg_attr(not(feature = "tls"), allow(unused_variables))]
        let tls = url_tls(&params)?;
        let spec = ClusterSpec::parse_url(&format!("memcache://{rest}")).map_err(|e| {
            // The topology knows the cluster's parameters; the message lists
            // every one a URL takes, the client's own too.
            if let memgroup_topology::TopologyError::UnknownParam { token } = &e {
                let known: Vec<&str> = memgroup_topology::URL_PARAMS
                    .iter()
                    .chain(&CLIENT_PARAMS)
                    .copied()
                    .collect();
                Error::new(
                    ErrorKind::Config,
                    format!(
                        "{}: unknown URL parameter {token:?} (known: {})",
                        crate::error::INVALID_CLUSTER,
                        known.join(", ")
                    ),
                )
            } else {
                Error::from(e)
            }
        })?;
        Ok(ClientUrl {
            spec,
            credentials,
            value_format,
            #[cfg(feature = "tls")]
            tls,
        })
    }
}

/// The client's own parameters of a URL's query (the rest are the
/// cluster's, for the topology's URL parser).
const CLIENT_PARAMS: [&str; 4] = ["value_format", "tls", "tls_ca", "tls_server_name"];

/// One of [`CLIENT_PARAMS`] and its percent-decoded value.
type UrlParam = (&'static str, String);

/// Takes the client's parameters ([`CLIENT_PARAMS`]) out of a URL's query:
/// returns them by name and the URL without them.
fn url_client_params(rest: &str) -> Result<(Vec<UrlParam>, String), Error> {
    let Some((authority, query)) = rest.split_once('?') else {
        return Ok((Vec::new(), rest.to_string()));
    };
    let mut taken: Vec<UrlParam> = Vec::new();
    let mut kept = Vec::new();
    for param in query.split('&') {
        let (name, value) = param.split_once('=').unwrap_or((param, ""));
        let Some(&name) = CLIENT_PARAMS.iter().find(|&&p| p == name) else {
            kept.push(param);
            continue;
        };
        if taken.iter().any(|(n, _)| *n == name) {
            return Err(Error::new(
                ErrorKind::Config,
                format!("URL parameter {name} is given twice"),
            ));
        }
        let value = percent_decode(value).ok_or_else(|| {
            Error::new(
                ErrorKind::Config,
                format!("bad %-escape in URL parameter {name}"),
            )
        })?;
        taken.push((name, value));
    }
    let rest = if kept.is_empty() {
        authority.to_string()
    } else {
        format!("{authority}?{}", kept.join("&"))
    };
    Ok((taken, rest))
}

/// The TLS settings a URL's `tls`, `tls_ca` and `tls_server_name` ask for:
/// `tls=true` alone trusts the platform's roots; `tls_ca=PATH` (which
/// implies `tls=true`) trusts that bundle.
fn url_tls(params: &[UrlParam]) -> Result<Option<UrlTls>, Error> {
    let get = |name: &str| params.iter().find(|(n, _)| *n == name).map(|(_, v)| v);
    let on = match get("tls").map(String::as_str) {
        None => get("tls_ca").is_some() || get("tls_server_name").is_some(),
        Some("true" | "1" | "yes") => true,
        Some("false" | "0" | "no") => false,
        Some(other) => {
            return Err(Error::new(
                ErrorKind::Config,
                format!("URL parameter tls={other:?}: expected true or false"),
            ));
        }
    };
    if !on {
        return Ok(None);
    }
    #[cfg(feature = "tls")]
    {
        let config = match get("tls_ca") {
            Some(path) => crate::TlsConfig::ca_file(path)?,
            None => crate::TlsConfig::platform_roots()?,
        };
        Ok(Some(match get("tls_server_name") {
            Some(name) => config.server_name(name),
            None => config,
        }))
    }
    #[cfg(not(feature = "tls"))]
    Err(Error::new(
        ErrorKind::Config,
        "the URL asks for TLS, but memgroup-client was built without its feature \"tls\"",
    ))
}

/// What a URL's TLS parameters give: a configuration (feature `tls`).
#[cfg(feature = "tls")]
type UrlTls = crate::TlsConfig;
#[cfg(not(feature = "tls"))]
type UrlTls = std::convert::Infallible;

/// Splits `user:password@` off a URL's authority (after `memcache://`).
fn url_credentials(rest: &str) -> Result<(Option<Credentials>, &str), Error> {
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let Some(at) = rest[..authority_end].rfind('@') else {
        return Ok((None, rest));
    };
    let bad = || {
        Error::new(
            ErrorKind::Config,
            "bad credentials in the URL (user:password@…)",
        )
    };
    let (user, password) = rest[..at].split_once(':').ok_or_else(bad)?;
    let user = percent_decode(user).ok_or_else(bad)?;
    let password = percent_decode(password).ok_or_else(bad)?;
    Ok((Some(Credentials::new(user, password)?), &rest[at + 1..]))
}

/// `%XX` escapes to bytes, which must then be UTF-8.
fn percent_decode(text: &str) -> Option<String> {
    String::from_utf8(memgroup_proto::percent_decode(text.as_bytes())?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_url_parameter_names_the_clients_own_parameters_too() {
        let error = ClientUrl::parse("memcache://h:11211?bogus=1").unwrap_err();
        let text = error.to_string();
        assert!(text.contains("\"bogus=1\""), "{text}");
        // The cluster's parameters (from the topology) and the client's, in
        // one list after the cause.
        let known = text.split("(known: ").nth(1).unwrap_or_default();
        for name in ["hash", "value_format", "tls", "tls_ca", "tls_server_name"] {
            assert!(known.contains(name), "{name} missing from {text}");
        }
        assert_eq!(text.matches('(').count(), 1, "{text}");
    }

    #[test]
    fn url_credentials_are_split_and_percent_decoded() {
        let (c, rest) = url_credentials("al%2Dice:p%40ss:w@h:1,h:2?hash=ketama").unwrap();
        let c = c.unwrap();
        assert_eq!(rest, "h:1,h:2?hash=ketama");
        assert_eq!(c, Credentials::new("al-ice", "p@ss:w").unwrap());
        assert!(
            url_credentials("a%20b:pw@h:1").is_err(),
            "no space in a user name"
        );
        assert!(
            !format!("{c:?}").contains("p@ss"),
            "the password never shows"
        );
        assert_eq!(url_credentials("h:1?x=a@b").unwrap().0, None);
        assert!(url_credentials("nouser@h:1").is_err());
        assert!(url_credentials("u:%zz@h:1").is_err());
    }

    #[test]
    fn url_client_params_are_taken_out_of_the_query() {
        let (params, rest) =
            url_client_params("h:1?hash=ketama&value_format=evcache&pool_size=2&tls=true").unwrap();
        assert_eq!(
            params,
            vec![("value_format", "evcache".into()), ("tls", "true".into())]
        );
        assert_eq!(rest, "h:1?hash=ketama&pool_size=2");
        let url = ClientUrl::parse("memcache://h:1?value_format=raw").unwrap();
        assert_eq!(url.value_format, Some(ValueFormat::Raw));
        assert_eq!(url_client_params("h:1").unwrap(), (vec![], "h:1".into()));
        assert!(ClientUrl::parse("memcache://h:1?value_format=json").is_err());
        assert!(url_client_params("h:1?tls=true&tls=false").is_err());
        let (params, _) = url_client_params("h:1?tls_ca=%2Fetc%2Fca.pem").unwrap();
        assert_eq!(params, vec![("tls_ca", "/etc/ca.pem".into())]);
    }

    #[test]
    fn the_builder_takes_every_setting_of_a_url() {
        let client = Client::builder()
            .url("memcache://app:pw@a=h1:1,h2:2;b=h3:3?value_format=evcache&pool_size=3&zone=b&write_policy=all")
            .build()
            .unwrap();
        assert_eq!(client.value_format().name(), "evcache");
        let topology = client.topology();
        assert_eq!(topology.groups().len(), 2);
        assert!(topology.groups().iter().all(|g| g.pool_size() == 3));
        let settings = topology.settings();
        assert_eq!(settings.local_zone.as_deref(), Some("b"));
        assert_eq!(settings.write_policy, memgroup_topology::WritePolicy::All);
        let error = Client::builder().url("h1:1").build().unwrap_err();
        assert!(
            error.to_string().contains("not a memcache:// URL"),
            "{error}"
        );
    }

    #[test]
    fn url_tls_parameters() {
        let on = |query: &str| {
            let (params, _) = url_client_params(query).unwrap();
            url_tls(&params).map(|t| t.is_some())
        };
        assert!(!on("h:1").unwrap());
        assert!(!on("h:1?tls=false").unwrap());
        assert!(on("h:1?tls=maybe").is_err());
        // A CA bundle that does not exist is a configuration error, named;
        // without the feature, asking for TLS is one.
        let error = on("h:1?tls_ca=/nonexistent/ca.pem").unwrap_err();
        let expected = if cfg!(feature = "tls") {
            "/nonexistent/ca.pem"
        } else {
            "feature \"tls\""
        };
        assert!(error.to_string().contains(expected), "{error}");
    }
}
