import { Module } from '@nestjs/common';
import { DemoWebhookReceiver } from './demo-webhook-receiver';

/** Starts the demo's webhook receiver before the outbox reads its options (it needs the receiver's URL). */
@Module({
  providers: [
    {
      provide: DemoWebhookReceiver,
      useFactory: async (): Promise<DemoWebhookReceiver> => {
        const receiver = new DemoWebhookReceiver();
        await receiver.listen(Number(process.env.DEMO_WEBHOOK_PORT ?? 0));
        return receiver;
      },
    },
  ],
  exports: [DemoWebhookReceiver],
})
export class DemoWebhooksModule {}
