export { OutboxBoardModule } from './outbox-board.module';
export type {
  OutboxBoardModuleOptions,
  OutboxBoardRequest,
  OutboxBoardTenants,
} from './outbox-board-options.interface';
