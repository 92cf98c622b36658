//! What the requests in flight and their answers hold at once, in bytes: a ledger per client
//! address and in total, so clients that send large requests and never read the answers
//! cannot make the gateway hold gigabytes before the write timeout cuts them off.
//!
//! A request is charged its body when it is admitted; its answer, as it goes out, the frame in
//! flight (the last one the connection took: the whole of a JSON answer, one event of a
//! stream); both until the answer is dropped (written, or cut off). A request that the ledger
//! cannot hold is refused at once: `429` past its client's share, `503` past the total, each
//! with `Retry-After`, naming the flag. What the host does with a call meanwhile (its parse,
//! the server's answer) is proportional to these bytes, so bounding them bounds it.

use std::collections::HashMap;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use axum::http::StatusCode;
use hyper::body::Buf;

/// Why a request cannot be held: the status it is refused with, and why, naming the flag.
#[derive(Debug)]
pub(super) struct Over {
    pub(super) status: StatusCode,
    pub(super) message: String,
}

/// The bytes held, per client address and in total, against their bounds.
pub(super) struct Ledger {
    max: usize,
    max_per_client: usize,
    held: Mutex<Held>,
}

#[derive(Default)]
struct Held {
    total: usize,
    per_client: HashMap<IpAddr, usize>,
}

/// What one request holds, given back when dropped.
pub(super) struct Charge {
    ledger: Arc<Ledger>,
    client: Option<IpAddr>,
    bytes: usize,
}

impl Ledger {
    pub(super) fn new(max: usize, max_per_client: usize) -> Self {
        Self {
            max,
            max_per_client,
            held: Mutex::new(Held::default()),
        }
    }

    /// Charges a request of `bytes` from `client`, or says which bound it would pass.
    pub(super) fn charge(
        self: &Arc<Self>,
        client: Option<IpAddr>,
        bytes: usize,
    ) -> Result<Charge, Over> {
        let Ok(mut held) = self.held.lock() else {
            return Err(Over {
                status: StatusCode::INTERNAL_SERVER_ERROR,
                message: "the gateway's ledger of bytes in flight is unusable".into(),
            });
        };
        if let Some(client) = client {
            let mine = held.per_client.get(&client).copied().unwrap_or(0);
            if mine.saturating_add(bytes) > self.max_per_client {
                return Err(Over {
                    status: StatusCode::TOO_MANY_REQUESTS,
                    message: format!(
                        "client {client} has {mine} bytes of requests and answers in flight, \
                         and this request's {bytes} would pass its {} (plurnk-mcp serve \
                         --max-bytes-in-flight-per-client): read the answers, then retry",
                        self.max_per_client
                    ),
                });
            }
        }
        if held.total.saturating_add(bytes) > self.max {
            return Err(Over {
                status: StatusCode::SERVICE_UNAVAILABLE,
                message: format!(
                    "the gateway has {} bytes of requests and answers in flight, and this \
                     request's {bytes} would pass its {} (plurnk-mcp serve \
                     --max-bytes-in-flight): retry shortly",
                    held.total, self.max
                ),
            });
        }
        held.total += bytes;
        if let Some(client) = client {
            *held.per_client.entry(client).or_default() += bytes;
        }
        Ok(Charge {
            ledger: self.clone(),
            client,
            bytes,
        })
    }

    fn move_by(&self, client: Option<IpAddr>, more: usize, less: usize) {
        let Ok(mut held) = self.held.lock() else {
            return;
        };
        held.total = held.total.saturating_add(more).saturating_sub(less);
        if let Some(client) = client {
            let mine = held.per_client.entry(client).or_default();
            *mine = mine.saturating_add(more).saturating_sub(less);
            if *mine == 0 {
                held.per_client.remove(&client);
            }
        }
    }
}

impl Drop for Charge {
    fn drop(&mut self) {
        self.ledger.move_by(self.client, 0, self.bytes);
    }
}

/// An answer body that charges its request's [`Charge`] with the frame in flight.
pub(super) struct Charged<B> {
    body: B,
    charge: Charge,
    /// The request body's bytes; the rest of the charge is the last frame.
    request: usize,
}

impl<B> Charged<B> {
    pub(super) fn new(body: B, charge: Charge) -> Self {
        let request = charge.bytes;
        Self {
            body,
            charge,
            request,
        }
    }
}

impl<B> http_body::Body for Charged<B>
where
    B: http_body::Body + Unpin,
    B::Data: Buf,
{
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.body).poll_frame(cx);
        if let Poll::Ready(Some(Ok(frame))) = &polled
            && let Some(data) = frame.data_ref()
        {
            // The frame before this one has gone to the connection's writer.
            let frame = data.remaining();
            let before = this.charge.bytes - this.request;
            this.charge
                .ledger
                .move_by(this.charge.client, frame, before);
            this.charge.bytes = this.request + frame;
        }
        polled
    }

    /// Never said ahead: the connection then polls once more, for the end, only when its
    /// writer can take more, which holds the charge of a whole JSON answer (a single frame)
    /// while the client leaves it unread; told the end with the frame, the connection would
    /// drop the body, and with it the charge, with the answer still unwritten.
    fn is_end_stream(&self) -> bool {
        false
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_holds_its_share_and_the_total_is_shared() {
        let ledger = Arc::new(Ledger::new(10, 6));
        let one = Some(IpAddr::from([127, 0, 0, 1]));
        let two = Some(IpAddr::from([127, 0, 0, 2]));
        let first = ledger.charge(one, 4).expect("within");
        let refused = ledger.charge(one, 3).err().expect("past its share");
        assert_eq!(refused.status, StatusCode::TOO_MANY_REQUESTS);
        let theirs = ledger.charge(two, 6).expect("another client's share");
        let refused = ledger.charge(two, 0).map(drop);
        assert!(refused.is_ok(), "nothing more");
        let refused = ledger.charge(None, 1).err().expect("past the total");
        assert_eq!(refused.status, StatusCode::SERVICE_UNAVAILABLE);
        drop(first);
        assert!(ledger.charge(one, 4).is_ok(), "given back");
        drop(theirs);
        let held = ledger.held.lock().expect("held");
        assert_eq!((held.total, held.per_client.len()), (0, 0));
    }
}
