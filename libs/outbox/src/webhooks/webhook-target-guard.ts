import { Inject, Injectable } from '@nestjs/common';
import { lookup as dnsLookup, type LookupAddress, type LookupAllOptions, type LookupOptions } from 'node:dns';
import { BlockList, isIP } from 'node:net';
import { OUTBOX_WEBHOOKS_RESOLVED_OPTIONS } from './outbox-webhooks.module-definition';
import type { ResolvedOutboxWebhooksOptions } from './outbox-webhooks-options.interface';
import { messages } from '../errors/outbox.messages';

/**
 * Address ranges a tenant's subscription may not reach unless `subscriptions.allowPrivateTargets` lets it:
 * this host, private and carrier-grade NAT networks, link-local (cloud metadata at 169.254.169.254), unique-local,
 * multicast and reserved ranges. IPv4-mapped IPv6 addresses (`::ffff:127.0.0.1`) match the IPv4 rules.
 */
const REFUSED_RANGES: readonly [string, number, 'ipv4' | 'ipv6'][] = [
  ['0.0.0.0', 8, 'ipv4'], // "this network", 0.0.0.0 connects to this host
  ['10.0.0.0', 8, 'ipv4'],
  ['100.64.0.0', 10, 'ipv4'], // carrier-grade NAT (and some clouds' metadata, 100.100.100.200)
  ['127.0.0.0', 8, 'ipv4'],
  ['169.254.0.0', 16, 'ipv4'], // link-local, cloud metadata
  ['172.16.0.0', 12, 'ipv4'],
  ['192.0.0.0', 24, 'ipv4'],
  ['192.168.0.0', 16, 'ipv4'],
  ['198.18.0.0', 15, 'ipv4'],
  ['224.0.0.0', 4, 'ipv4'], // multicast
  ['240.0.0.0', 4, 'ipv4'], // reserved, broadcast
  ['::', 96, 'ipv6'], // unspecified, loopback, IPv4-compatible
  ['64:ff9b:1::', 48, 'ipv6'], // local-use NAT64
  ['fc00::', 7, 'ipv6'], // unique-local (AWS metadata fd00:ec2::254)
  ['fe80::', 10, 'ipv6'], // link-local
  ['fec0::', 10, 'ipv6'], // site-local (deprecated)
  ['ff00::', 8, 'ipv6'], // multicast
];

/** Error code of a connection refused by the guard (what a delivery records as `targetRefused`). */
export const TARGET_REFUSED = 'EOUTBOXTARGETREFUSED';

type LookupCallback = (
  error: NodeJS.ErrnoException | null,
  address: string | LookupAddress[],
  family?: number,
) => void;

/**
 * Keeps tenant subscriptions away from the private side of the network (SSRF): `add()` checks the URL's host,
 * and every request resolves the host itself, checks every address, and connects only to a checked one, so a
 * name that resolved to a public address when added and to a private one later (DNS rebinding) is refused.
 * Static webhooks, the operator's own, are not checked.
 */
@Injectable()
export class WebhookTargetGuard {
  private readonly refused = new BlockList();
  private readonly allowed = new BlockList();

  constructor(@Inject(OUTBOX_WEBHOOKS_RESOLVED_OPTIONS) options: ResolvedOutboxWebhooksOptions) {
    for (const [network, prefix, type] of REFUSED_RANGES) this.refused.addSubnet(network, prefix, type);
    for (const entry of options.subscriptions.allowPrivateTargets) {
      const range = parseRange(entry);
      if (range) this.allowed.addSubnet(range.network, range.prefix, range.type);
    }
  }

  /** True when a subscription may not connect to this IP address. */
  isRefused(address: string): boolean {
    const type = isIP(address) === 6 ? 'ipv6' : 'ipv4';
    return this.refused.check(address, type) && !this.allowed.check(address, type);
  }

  /** Why a subscription may not post to this URL (its host, or an address it resolves to), or null. */
  async urlProblem(field: string, url: URL): Promise<string | null> {
    const host = hostOf(url);
    if (isIP(host)) return this.isRefused(host) ? messages.webhookTargetRefused(field, host, host) : null;
    let addresses: LookupAddress[];
    try {
      addresses = await new Promise<LookupAddress[]>((resolve, reject) =>
        dnsLookup(host, { all: true }, (error, found) => (error ? reject(error) : resolve(found))),
      );
    } catch (error) {
      return messages.webhookTargetUnresolved(field, host, (error as NodeJS.ErrnoException).code ?? 'error');
    }
    const bad = addresses.find((a) => this.isRefused(a.address));
    return bad ? messages.webhookTargetRefused(field, host, bad.address) : null;
  }

  /** The IP literal a URL names when it is a refused one, else null (names are checked by {@link lookup}). */
  refusedLiteral(url: URL): string | null {
    const host = hostOf(url);
    return isIP(host) && this.isRefused(host) ? host : null;
  }

  /**
   * A `lookup` for `http.request`/`net.connect` that resolves as `dns.lookup` does and fails with
   * {@link TARGET_REFUSED} when any address is refused, so the socket only ever connects to a checked address.
   */
  readonly lookup = (hostname: string, options: LookupOptions, callback: LookupCallback): void => {
    dnsLookup(hostname, { ...options, all: true } as LookupAllOptions, (error, addresses) => {
      if (error) return callback(error, options.all ? [] : '');
      const bad = addresses.find((a) => this.isRefused(a.address));
      if (bad) {
        const refused: NodeJS.ErrnoException = new Error(
          messages.webhookTargetRefused('url', hostname, bad.address),
        );
        refused.code = TARGET_REFUSED;
        return callback(refused, options.all ? [] : '');
      }
      if (options.all) return callback(null, addresses);
      const first = addresses[0]!;
      callback(null, first.address, first.family);
    });
  };
}

/** The problem with one entry of `subscriptions.allowPrivateTargets`, or null. */
export function allowedTargetProblem(field: string, entry: unknown): string | null {
  return parseRange(entry)
    ? null
    : messages.badOption(
        field,
        'an IP address or a CIDR range like "10.20.0.0/16" or "fd00:ec2::/32"',
        entry,
      );
}

function parseRange(entry: unknown): { network: string; prefix: number; type: 'ipv4' | 'ipv6' } | null {
  if (typeof entry !== 'string') return null;
  const [network = '', prefixText, ...rest] = entry.trim().split('/');
  const version = isIP(network);
  if (version === 0 || rest.length > 0) return null;
  const max = version === 4 ? 32 : 128;
  const prefix = prefixText === undefined ? max : /^\d{1,3}$/.test(prefixText) ? Number(prefixText) : -1;
  if (prefix < 0 || prefix > max) return null;
  return { network, prefix, type: version === 4 ? 'ipv4' : 'ipv6' };
}

/** The URL's host without IPv6 brackets (the WHATWG parser already turned 0x7f000001 and 2130706433 into 127.0.0.1). */
function hostOf(url: URL): string {
  return url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
}
