import { Column, Entity, PrimaryColumn } from 'typeorm';

@Entity({ name: 'contact_activity' })
export class ContactActivity {
  @PrimaryColumn({ name: 'event_id', type: 'uuid' })
  eventId!: string;

  @Column({ name: 'contact_id', type: 'uuid' })
  contactId!: string;

  @Column({ type: 'text' })
  summary!: string;
}
