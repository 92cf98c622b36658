//! How the store reaches its database, trusting nothing that answers at the address: every
//! connection (the pool's and the listener's) is dialled here and read through [`Guarded`].
//!
//! tokio-postgres reads a message whole before it looks at it, however long its header says
//! it is (up to 2 GiB), and answers a request for the password in clear, or as MD5, with the
//! password, whatever the connection. A fake or intercepting server at the address could so
//! make the host buffer gigabytes per connection, or learn the password. So the bytes the
//! driver reads pass through [`Guarded`] first, which follows the protocol's framing:
//!
//! - a message longer than [`MAX_MESSAGE_BYTES`] ends the connection with an error that
//!   names the bound, before its body is read;
//! - on a connection without TLS, a request for the password in clear or as MD5 ends the
//!   connection before the driver sees it: SCRAM (which never sends the password) is what
//!   such a connection may use;
//! - a server that does not offer TLS where the URL asks for it (or, without `sslmode`, where
//!   the host is not loopback) is told apart from any other failure, saying what to do.
//!
//! With TLS the raw socket carries TLS records, unread here; the stream inside TLS is
//! guarded the same way ([`GuardedTls`]). The driver is given the socket with
//! `Config::connect_raw`, so the crate itself is not patched: the hosts are dialled here, in
//! the URL's order, with its connect timeout.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use futures::{StreamExt, TryFutureExt};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpSocket, TcpStream, UnixStream};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_postgres::config::{Host, SslMode, SslNegotiation};
use tokio_postgres::tls::{ChannelBinding, MakeTlsConnect, NoTls, TlsConnect, TlsStream};
use tokio_postgres::{AsyncMessage, Client, Config, Connection, Error};
use tokio_postgres_rustls::MakeRustlsConnect;

/// The longest message read from the database: a row of the store (a definition is at most
/// [`MAX_DEFINITION_BYTES`](crate::store::MAX_DEFINITION_BYTES)) with room to spare; an error,
/// a notice or a notification is a few hundred bytes.
pub(super) const MAX_MESSAGE_BYTES: usize = 8 << 20;

/// How long dialling one address may take when the URL gives no `connect_timeout`.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The authentication requests (`R` messages) that carry the password itself: in clear (3)
/// and as MD5 of it and the user (5), which is as good as the password to whoever reads it.
const CLEARTEXT_PASSWORD: u32 = 3;
const MD5_PASSWORD: u32 = 5;

/// What arrives on a connection unasked (notifications, notices) or ends it.
pub(super) type Arrived = Result<AsyncMessage, Error>;

/// How connections are made: plain, or with rustls.
#[derive(Clone)]
pub(super) enum Tls {
    Plain,
    Rustls(MakeRustlsConnect),
}

/// Dials the database a configuration names, every connection guarded.
#[derive(Clone)]
pub(super) struct Dialer {
    pub(super) config: Config,
    pub(super) tls: Tls,
    /// TLS is used because the URL gave no `sslmode` and a host is not loopback.
    pub(super) tls_by_default: bool,
}

impl Dialer {
    /// One connection: its client, and a task that drives it until the client is dropped or
    /// the server goes, handing what arrives unasked to `arrived` (or dropping it).
    pub(super) async fn open(
        &self,
        arrived: Option<mpsc::UnboundedSender<Arrived>>,
    ) -> Result<(Client, JoinHandle<()>), Error> {
        let (socket, hostname) = dial(&self.config).await;
        let raw = Guarded::raw(socket, self.answer());
        match &self.tls {
            Tls::Plain => {
                let (client, connection) = self.config.connect_raw(raw, NoTls).await?;
                Ok((client, drive(connection, arrived)))
            }
            Tls::Rustls(make) => {
                let name = hostname.as_deref().unwrap_or("");
                let tls = match MakeTlsConnect::<Guarded<Socket>>::make_tls_connect(
                    &mut make.clone(),
                    name,
                ) {
                    Ok(tls) => tls,
                    Err(never) => match never {},
                };
                let (client, connection) = self.config.connect_raw(raw, GuardedTls(tls)).await?;
                Ok((client, drive(connection, arrived)))
            }
        }
    }

    /// What the raw socket carries before any message: the answer to `SSLRequest`, or TLS
    /// from the first byte, or messages in clear.
    fn answer(&self) -> Start {
        if matches!(self.tls, Tls::Plain) || self.config.get_ssl_mode() == SslMode::Disable {
            Start::Clear
        } else if self.config.get_ssl_negotiation() == SslNegotiation::Direct {
            Start::Tls
        } else if self.config.get_ssl_mode() == SslMode::Prefer {
            Start::SslAnswer(Need::Preferred)
        } else if self.tls_by_default {
            Start::SslAnswer(Need::ByDefault)
        } else {
            Start::SslAnswer(Need::Asked)
        }
    }
}

impl deadpool_postgres::Connect for Dialer {
    fn connect(
        &self,
        _: &Config,
    ) -> futures::future::BoxFuture<'_, Result<(Client, JoinHandle<()>), Error>> {
        Box::pin(self.open(None))
    }
}

/// Drives `connection` in a task of its own, handing what arrives unasked to `arrived`.
fn drive<S, T>(
    mut connection: Connection<S, T>,
    arrived: Option<mpsc::UnboundedSender<Arrived>>,
) -> JoinHandle<()>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    tokio::spawn(async move {
        let mut messages = futures::stream::poll_fn(move |cx| connection.poll_message(cx));
        while let Some(message) = messages.next().await {
            let end = message.is_err();
            if let Some(arrived) = &arrived {
                let _ = arrived.send(message);
            }
            if end {
                break;
            }
        }
    })
}

// === dialling ===

/// A connected socket to the first host of `config` that answers, with the name TLS is to
/// verify; or, when none does, a socket that fails with the last reason on first use, so the
/// driver words it as it words any failure to communicate.
async fn dial(config: &Config) -> (Socket, Option<String>) {
    let timeout = config
        .get_connect_timeout()
        .copied()
        .unwrap_or(CONNECT_TIMEOUT);
    let ports = config.get_ports();
    let mut last = io::Error::new(io::ErrorKind::InvalidInput, "the URL names no host");
    for (index, host) in config.get_hosts().iter().enumerate() {
        let port = ports
            .get(index)
            .or_else(|| ports.first())
            .copied()
            .unwrap_or(5432);
        let hostaddr = config.get_hostaddrs().get(index).copied();
        let dialled = match (host, hostaddr) {
            (_, Some(address)) => tcp(&[SocketAddr::new(address, port)], timeout).await,
            (Host::Tcp(name), None) => match tokio::net::lookup_host((name.as_str(), port)).await {
                Ok(addresses) => tcp(&addresses.collect::<Vec<_>>(), timeout).await,
                Err(error) => Err(error),
            },
            (Host::Unix(folder), None) => {
                let path = folder.join(format!(".s.PGSQL.{port}"));
                match tokio::time::timeout(timeout, UnixStream::connect(path)).await {
                    Ok(connected) => connected.map(Socket::Unix),
                    Err(_) => Err(io::ErrorKind::TimedOut.into()),
                }
            }
        };
        match dialled {
            Ok(socket) => {
                let name = match host {
                    Host::Tcp(name) => Some(name.clone()),
                    Host::Unix(_) => None,
                };
                return (socket, name);
            }
            Err(error) => last = error,
        }
    }
    (Socket::Failed(Some(last)), None)
}

/// The first of `addresses` that accepts within `timeout`, with keep-alive and no delay.
async fn tcp(addresses: &[SocketAddr], timeout: Duration) -> io::Result<Socket> {
    let mut last = io::Error::new(io::ErrorKind::InvalidInput, "the name has no address");
    for address in addresses {
        let socket = if address.is_ipv4() {
            TcpSocket::new_v4()
        } else {
            TcpSocket::new_v6()
        }?;
        socket.set_keepalive(true)?;
        match tokio::time::timeout(timeout, socket.connect(*address)).await {
            Ok(Ok(stream)) => {
                stream.set_nodelay(true)?;
                return Ok(Socket::Tcp(stream));
            }
            Ok(Err(error)) => last = error,
            Err(_) => {
                last = io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("{address} did not accept within {} ms", timeout.as_millis()),
                );
            }
        }
    }
    Err(last)
}

/// A connection's socket: TCP, a Unix socket, or the reason none could be had.
pub(super) enum Socket {
    Tcp(TcpStream),
    Unix(UnixStream),
    /// Fails every read and write with the reason, once taken.
    Failed(Option<io::Error>),
}

impl Socket {
    fn failed(reason: &mut Option<io::Error>) -> io::Error {
        reason
            .take()
            .unwrap_or_else(|| io::ErrorKind::NotConnected.into())
    }
}

impl AsyncRead for Socket {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Tcp(stream) => Pin::new(stream).poll_read(cx, buf),
            Self::Unix(stream) => Pin::new(stream).poll_read(cx, buf),
            Self::Failed(reason) => Poll::Ready(Err(Self::failed(reason))),
        }
    }
}

impl AsyncWrite for Socket {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Self::Tcp(stream) => Pin::new(stream).poll_write(cx, buf),
            Self::Unix(stream) => Pin::new(stream).poll_write(cx, buf),
            Self::Failed(reason) => Poll::Ready(Err(Self::failed(reason))),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Tcp(stream) => Pin::new(stream).poll_flush(cx),
            Self::Unix(stream) => Pin::new(stream).poll_flush(cx),
            Self::Failed(reason) => Poll::Ready(Err(Self::failed(reason))),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Tcp(stream) => Pin::new(stream).poll_shutdown(cx),
            Self::Unix(stream) => Pin::new(stream).poll_shutdown(cx),
            Self::Failed(_) => Poll::Ready(Ok(())),
        }
    }
}

// === the guard ===

/// Why TLS is wanted, for the words of a server that does not offer it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Need {
    /// `sslmode=prefer`: a server without TLS is spoken to in clear.
    Preferred,
    /// The URL's `sslmode` asks for it.
    Asked,
    /// No `sslmode`, and a host that is not loopback.
    ByDefault,
}

/// What a raw socket carries first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Start {
    /// Messages in clear.
    Clear,
    /// One byte answering `SSLRequest`: `S`, TLS follows; anything else, no TLS.
    SslAnswer(Need),
    /// TLS from the first byte (`sslnegotiation=direct`).
    Tls,
}

/// Where a [`Guarded`] stream is in what it reads.
#[derive(Debug, Clone, Copy)]
enum State {
    /// Waiting for the answer to `SSLRequest`.
    SslAnswer(Need),
    /// TLS records: the stream inside checks the messages.
    Tls,
    /// `have` bytes of a message's tag and length.
    Header { bytes: [u8; 5], have: usize },
    /// `have` bytes of an authentication request's code, `rest` bytes of its body after it.
    AuthCode {
        bytes: [u8; 4],
        have: usize,
        rest: usize,
    },
    /// `rest` bytes of a message's body still to pass.
    Body { rest: usize },
}

/// A stream read message by message on its way to the driver (see the module docs).
pub(super) struct Guarded<S> {
    inner: S,
    state: State,
    /// The connection is not encrypted: no password may be asked for in clear.
    clear: bool,
    /// Why the stream was ended, repeated to every later read.
    refused: Option<(io::ErrorKind, String)>,
}

impl<S> Guarded<S> {
    /// The raw socket of a connection, which carries `start` first.
    fn raw(inner: S, start: Start) -> Self {
        let state = match start {
            Start::Clear => State::Header {
                bytes: [0; 5],
                have: 0,
            },
            Start::SslAnswer(need) => State::SslAnswer(need),
            Start::Tls => State::Tls,
        };
        Self {
            inner,
            state,
            clear: start == Start::Clear,
            refused: None,
        }
    }

    /// The stream inside TLS: messages from the first byte, encrypted.
    fn encrypted(inner: S) -> Self {
        Self {
            inner,
            state: State::Header {
                bytes: [0; 5],
                have: 0,
            },
            clear: false,
            refused: None,
        }
    }

    /// Follows `bytes` through the framing; the refusal they make, if any.
    fn check(&mut self, bytes: &[u8]) -> Result<(), (io::ErrorKind, String)> {
        let mut at = 0;
        while at < bytes.len() {
            match &mut self.state {
                State::Tls => return Ok(()),
                State::SslAnswer(need) => {
                    let need = *need;
                    let byte = bytes[at];
                    at += 1;
                    if byte == b'S' {
                        self.state = State::Tls;
                        return Ok(());
                    }
                    if need != Need::Preferred {
                        return Err((io::ErrorKind::ConnectionRefused, no_tls(need)));
                    }
                    // Spoken to in clear from here; the byte was the answer, not a message.
                    self.clear = true;
                    self.state = State::Header {
                        bytes: [0; 5],
                        have: 0,
                    };
                }
                State::Header { bytes: head, have } => {
                    let take = (5 - *have).min(bytes.len() - at);
                    head[*have..*have + take].copy_from_slice(&bytes[at..at + take]);
                    *have += take;
                    at += take;
                    if *have < 5 {
                        continue;
                    }
                    let tag = head[0];
                    let length = u32::from_be_bytes([head[1], head[2], head[3], head[4]]) as usize;
                    if length < 4 {
                        return Err((
                            io::ErrorKind::InvalidData,
                            format!(
                                "the server sent a message whose length ({length}) is less \
                                 than its own length field: it does not speak PostgreSQL's \
                                 protocol"
                            ),
                        ));
                    }
                    if length + 1 > MAX_MESSAGE_BYTES {
                        return Err((io::ErrorKind::InvalidData, too_long(tag, length)));
                    }
                    let rest = length - 4;
                    self.state = if tag == b'R' && self.clear && rest >= 4 {
                        State::AuthCode {
                            bytes: [0; 4],
                            have: 0,
                            rest: rest - 4,
                        }
                    } else {
                        State::Body { rest }
                    };
                    self.finish_body();
                }
                State::AuthCode {
                    bytes: code,
                    have,
                    rest,
                } => {
                    let take = (4 - *have).min(bytes.len() - at);
                    code[*have..*have + take].copy_from_slice(&bytes[at..at + take]);
                    *have += take;
                    at += take;
                    if *have < 4 {
                        continue;
                    }
                    let asked = u32::from_be_bytes(*code);
                    if asked == CLEARTEXT_PASSWORD || asked == MD5_PASSWORD {
                        return Err((io::ErrorKind::PermissionDenied, in_clear(asked)));
                    }
                    self.state = State::Body { rest: *rest };
                    self.finish_body();
                }
                State::Body { rest } => {
                    let take = (*rest).min(bytes.len() - at);
                    *rest -= take;
                    at += take;
                    self.finish_body();
                }
            }
        }
        Ok(())
    }

    /// A body with nothing left to read is done: the next byte starts a message.
    fn finish_body(&mut self) {
        if let State::Body { rest: 0 } = self.state {
            self.state = State::Header {
                bytes: [0; 5],
                have: 0,
            };
        }
    }
}

/// The words of a message past [`MAX_MESSAGE_BYTES`].
fn too_long(tag: u8, length: usize) -> String {
    let tag = if tag.is_ascii_graphic() {
        format!("'{}'", char::from(tag))
    } else {
        format!("0x{tag:02x}")
    };
    format!(
        "the server sent a message ({tag}) of {length} bytes, over the {} MiB a message from \
         the store may have: the connection was closed; if this is the database, a row of it \
         is larger than any the host writes",
        MAX_MESSAGE_BYTES >> 20
    )
}

/// The words of a request for the password where anyone on the way could read it.
fn in_clear(asked: u32) -> String {
    let how = if asked == MD5_PASSWORD {
        "as MD5 (which is as good as the password to whoever reads it)"
    } else {
        "in clear"
    };
    format!(
        "the server asked for the password {how} over a connection without TLS, and it was \
         not sent: have the server use scram-sha-256 (password_encryption, and scram-sha-256 \
         in pg_hba.conf), or connect with TLS (?sslmode=require)"
    )
}

/// The words of a server that does not offer TLS where it is wanted.
fn no_tls(need: Need) -> String {
    match need {
        Need::ByDefault => "the server does not offer TLS, which the store uses by default \
                            for a host that is not loopback: give the server TLS, or add \
                            ?sslmode=disable to the URL to connect in clear (anyone on the way \
                            could then read and change what the store holds)"
            .to_owned(),
        _ => "the server does not offer TLS, which the URL's sslmode asks for: give the server \
              TLS, or change the URL's sslmode"
            .to_owned(),
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Guarded<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if let Some((kind, why)) = &this.refused {
            return Poll::Ready(Err(io::Error::new(*kind, why.clone())));
        }
        let before = buf.filled().len();
        ready!(Pin::new(&mut this.inner).poll_read(cx, buf))?;
        let read = buf.filled()[before..].to_vec();
        match this.check(&read) {
            Ok(()) => Poll::Ready(Ok(())),
            Err((kind, why)) => {
                // Nothing of a refused read reaches the driver.
                buf.set_filled(before);
                this.refused = Some((kind, why.clone()));
                Poll::Ready(Err(io::Error::new(kind, why)))
            }
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Guarded<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

impl<S: TlsStream + Unpin> TlsStream for Guarded<S> {
    fn channel_binding(&self) -> ChannelBinding {
        self.inner.channel_binding()
    }
}

/// A TLS connector whose stream is [`Guarded`] inside the encryption.
struct GuardedTls<T>(T);

impl<S, T> TlsConnect<S> for GuardedTls<T>
where
    T: TlsConnect<S>,
{
    type Stream = Guarded<T::Stream>;
    type Error = T::Error;
    type Future = futures::future::MapOk<T::Future, fn(T::Stream) -> Guarded<T::Stream>>;

    fn connect(self, stream: S) -> Self::Future {
        self.0.connect(stream).map_ok(Guarded::encrypted)
    }
}

#[cfg(test)]
pub(super) mod tests;
