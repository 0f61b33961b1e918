/** Error codes of broker deliveries (`outbox_deliveries.error_code`); docs/brokers.md says what follows each. */
export const BROKER_ERROR_CODES = {
  /** No connection could be had (refused, DNS, handshake, channel): not sent, no attempt spent. */
  brokerUnavailable: 'brokerUnavailable',
  /** The connection dropped before the broker acknowledged: the broker may hold it. Retried (a duplicate is possible). */
  connectionLost: 'connectionLost',
  /** The broker refused the message (RabbitMQ nack, JetStream error such as a full stream). Retried. */
  publishNacked: 'publishNacked',
  /** No queue is bound for its routing key (returned, `mandatory`), or no stream captures its subject. Retried. */
  unroutable: 'unroutable',
  /** No acknowledgement within `timeoutMs`: the broker may hold it. Retried (a duplicate is possible). */
  publishTimeout: 'publishTimeout',
  /** `topology: 'check'` and the exchange does not exist. Retried. */
  exchangeNotFound: 'exchangeNotFound',
  /** The forwarder's circuit is open: not sent, no attempt spent. */
  circuitOpen: 'circuitOpen',
  /** The event cannot become a JSON body. Dead at once. */
  malformedPayload: 'malformedPayload',
  /** `routingKey` or `subject` threw, or gave no usable name. Dead at once (replay after fixing it). */
  badDestination: 'badDestination',
} as const;
